"""``solaris_train`` run through Airflow (``dag.test()``) on a fresh tiny world with its own MLflow store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from precompute_env import export

from solaris.cli import main
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.synthetic import PRESETS, generate_world
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHALLENGER, CHAMPION, DEMAND_MODEL, FM_MODEL
from solaris.vms import DEFAULT_VMS

CTR, CVR = DEFAULT_VMS


def task_states(dag_run: Any) -> dict[str, list[str]]:
    from airflow.utils.session import create_session

    with create_session() as session:
        states: dict[str, list[str]] = {}
        for ti in dag_run.get_task_instances(session=session):
            states.setdefault(ti.task_id, []).append(str(ti.state))
    return states


def aliases(client: Any, name: str) -> tuple[str, str]:
    return tuple(str(client.get_model_version_by_alias(name, a).version) for a in (CHAMPION, CHALLENGER))  # type: ignore[return-value]


def test_train_dag_registers_promotes_and_announces_then_trains_one_vm_alone(
    dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path), "SOLARIS_WORLD": "tiny", "SOLARIS_DEVICE": "cpu"})
    generate_world(PRESETS["tiny"].with_seed(3), settings.world_dir(), overwrite=True, progress=False)
    export(settings, monkeypatch)
    dag = dagbag.dags["solaris_train"]

    dag_run = dag.test(run_conf={"epochs": 1, "seed": 0})

    assert dag_run.state == "success"
    tasks = ["plan_vms", "train_fm", "train_ae", "promote", "announce_chain", "announce_vms", "train_demand"]
    assert task_states(dag_run) == dict.fromkeys(tasks, ["success"]) | {"train_vm": ["success"] * 2}  # ctr, cvr
    with create_session() as session:
        announced = session.scalars(
            select(AssetModel.name)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_run_id == dag_run.run_id)
        ).all()
    assert set(announced) == {"solaris_fm_champion", "solaris_ae_champion", "solaris_vm_champion"}
    client = registry.connect(settings)
    ctr, cvr = (registry.resolve_champions(client, spec.name) for spec in (CTR, CVR))
    assert ctr.embedding_version == cvr.embedding_version  # one table for both
    for name, version in ((FM_MODEL, ctr.fm), (AE_MODEL, ctr.ae), (CTR.registered_name, ctr.vm)):
        assert str(client.get_model_version_by_alias(name, CHAMPION).version) == str(version)
    # the demand model: trained up to the run's logical time, which a run triggered now puts past the log's end
    demand = client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION)
    assert demand.tags["trained_until"] == EventLog(settings.world_dir()).end.isoformat()

    before = {name: aliases(client, name) for name in (FM_MODEL, AE_MODEL, CTR.registered_name)}
    alone = dag.test(run_conf={"epochs": 1, "seed": 1, "vm": "cvr"})

    assert alone.state == "success"
    states = task_states(alone)
    assert states["train_fm"] == states["train_ae"] == states["announce_chain"] == ["skipped"]
    assert states["train_vm"] == ["success"]  # one mapped task: cvr alone
    assert {name: aliases(client, name) for name in before} == before  # FM, AE and ctr untouched
    retrained = registry.version_by_alias(client, CVR.registered_name, CHALLENGER)
    assert retrained is not None and str(retrained.version) != cvr.vm
    assert retrained.tags["embedding_version"] == cvr.embedding_version  # on the champion FM and AE
    moved = registry.resolve_champions(client, CVR.name).vm == str(retrained.version)
    assert moved == ("beats" in retrained.tags["promotion"])
    assert states["announce_vms"] == ["success" if moved else "skipped"]

    # A third VM is configuration plus one training run: a click model for the first three slots.
    vms_file = tmp_path / "vms.toml"
    vms_file.write_text('[vm.ctr]\n[vm.cvr]\nlabel = "conversion"\n[vm.ctr_top]\nlabel = "click"\npositions = [0, 2]\n')
    monkeypatch.setenv("SOLARIS_VMS_FILE", str(vms_file))
    untouched = {name: aliases(client, name) for name in (*before, CVR.registered_name)}
    assert main(["train", "vm", "--vm", "ctr_top", "--epochs", "1", "--threads", "1", "--no-progress"]) == 0
    top = registry.resolve_champions(client, "ctr_top")  # its first version: no champion to beat
    assert top.embedding_version == ctr.embedding_version  # on the table every VM reads
    assert client.get_model_version("solaris-vm-ctr_top", top.vm).tags["positions"] == "0-2"
    assert {name: aliases(client, name) for name in untouched} == untouched
