"""``solaris_train`` run through Airflow (``dag.test()``) on a fresh tiny world with its own MLflow store."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from solaris.config import Settings
from solaris.data.synthetic import PRESETS, generate_world
from solaris.tracking import registry
from solaris.data.eventlog import EventLog
from solaris.tracking.registry import AE_MODEL, CHAMPION, DEMAND_MODEL, FM_MODEL, VM_MODEL

from precompute_env import export


def test_train_dag_registers_promotes_and_announces(
    dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    from airflow.models.asset import AssetEvent, AssetModel
    from airflow.utils.session import create_session
    from sqlalchemy import select

    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path), "SOLARIS_WORLD": "tiny", "SOLARIS_DEVICE": "cpu"})
    generate_world(PRESETS["tiny"].with_seed(3), settings.world_dir(), overwrite=True, progress=False)
    export(settings, monkeypatch)

    dag_run = dagbag.dags["solaris_train"].test(run_conf={"epochs": 1, "seed": 0})

    assert dag_run.state == "success"
    with create_session() as session:
        states = {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}
        announced = session.scalars(
            select(AssetModel.name)
            .join(AssetEvent, AssetEvent.asset_id == AssetModel.id)
            .where(AssetEvent.source_run_id == dag_run.run_id)
        ).all()
    tasks = ["train_fm", "train_ae", "train_vms", "promote", "announce", "train_demand"]
    assert states == dict.fromkeys(tasks, "success")
    assert set(announced) == {"solaris_fm_champion", "solaris_ae_champion", "solaris_vm_champion"}
    client = registry.connect(settings)
    pinned = registry.resolve_champions(client)
    for name, version in ((FM_MODEL, pinned.fm), (AE_MODEL, pinned.ae), (VM_MODEL, pinned.vm)):
        assert str(client.get_model_version_by_alias(name, CHAMPION).version) == str(version)
    # the demand model: trained up to the run's logical time, which a run triggered now puts past the log's end
    demand = client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION)
    assert demand.tags["trained_until"] == EventLog(settings.world_dir()).end.isoformat()
