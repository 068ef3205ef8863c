"""The whole training chain on the tiny world, then the registry as the precompute and the ranker see it.

One session-wide run of ``train_all`` (the ``trained`` fixture in tests/conftest.py, about a minute on 2
cores) is shared by every test here and by the precompute and DAG tests.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import replace

import numpy as np
import pandas as pd
import pytest
import torch

import mlflow
from mlflow import MlflowClient
from solaris.cli import main
from solaris.config import Settings
from solaris.embedding_version import VersionMismatch
from solaris.models.vm import score
from solaris.models.vm_data import Teacher, build_vm_data
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHALLENGER, CHAMPION, DEMAND_MODEL, FM_MODEL
from solaris.training.gate import Challenger, promotion_gate
from solaris.training.jobs import (
    TrainPlan,
    TrainReport,
    World,
    champion_examples,
    champion_ne,
    register_vm,
    vm_eval,
)
from solaris.vms import DEFAULT_VMS

CTR, CVR = DEFAULT_VMS  # the session's training trained both; ctr leads
VM_MODEL = CTR.registered_name

AGE = TrainPlan().served_age_hours  # the served pair codes' age the session's training validated on


@pytest.fixture
def client(trained: tuple[Settings, World, TrainReport]) -> MlflowClient:
    return registry.connect(trained[0])


def test_fm_beats_the_base_vm_on_held_out_hours(trained: tuple[Settings, World, TrainReport]) -> None:
    _, _, report = trained
    base = report.vms[CTR.name]["base"]
    assert report.fm.metrics["ne"] < base.metrics["ne"]
    assert report.fm.metrics["flops_per_pair"] > 10 * base.metrics["flops_per_pair"]


def test_champion_vm_from_the_registry_scores_like_the_in_process_one(
    trained: tuple[Settings, World, TrainReport], client: MlflowClient
) -> None:
    _, world, report = trained
    pinned = registry.resolve_champions(client, CTR.name)
    served = report.vms[CTR.name]["solaris"]
    assert (pinned.fm, pinned.ae, pinned.vm) == (report.fm.version, report.ae.version, served.version)
    teacher = Teacher(registry.load_fm(pinned.fm), registry.load_ae(pinned.ae), pinned.fm, pinned.ae, device="cpu")
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    loaded = registry.load_vm(CTR.name, pinned.vm)
    in_process = score(served.model, data.matrix(served.model.config))
    np.testing.assert_allclose(score(loaded, data.matrix(loaded.config)), in_process, rtol=1e-6)
    assert vm_eval(loaded, data)["ne"] == pytest.approx(served.metrics["ne"], rel=1e-6)
    # MLflow's own view of the same version, by alias: the pyfunc (models from code) serves the same scores.
    pyfunc = mlflow.pyfunc.load_model(f"models:/{VM_MODEL}@{CHAMPION}")
    rows = data.matrix(loaded.config)[:64]
    frame = pd.DataFrame(rows, columns=list(loaded.config.columns()))
    np.testing.assert_allclose(np.asarray(pyfunc.predict(frame)), in_process[:64], rtol=1e-6)


def test_registry_holds_the_chain_and_the_demand_model_with_aliases_and_version_links(
    trained: tuple[Settings, World, TrainReport], client: MlflowClient
) -> None:
    settings, _, report = trained
    names = {FM_MODEL, AE_MODEL, CTR.registered_name, CVR.registered_name, DEMAND_MODEL}
    assert {m.name for m in client.search_registered_models()} == names
    demand = client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION)
    assert demand.tags["role"] == "demand" and 0.5 < float(demand.tags["valid_auc"]) <= 1
    fm, ae, vm = report.fm.version, report.ae.version, report.vms[CTR.name]["solaris"].version
    for name, version in ((FM_MODEL, fm), (AE_MODEL, ae), (VM_MODEL, vm)):
        assert str(client.get_model_version_by_alias(name, CHAMPION).version) == version
        assert str(client.get_model_version_by_alias(name, CHALLENGER).version) == version
    assert client.get_model_version(AE_MODEL, ae).tags["fm_version"] == fm
    vm_tags = client.get_model_version(VM_MODEL, vm).tags
    assert vm_tags["embedding_version"] == f"fm{fm}-ae{ae}-d32"
    assert vm_tags["variant"] == "solaris" and float(vm_tags["eval_ne"]) == pytest.approx(
        report.vms[CTR.name]["solaris"].metrics["ne"], rel=1e-5
    )
    base_tags = client.get_model_version(VM_MODEL, report.vms[CTR.name]["base"].version).tags
    assert "embedding_version" not in base_tags
    run = client.get_run(client.get_model_version(FM_MODEL, fm).run_id)
    assert "loss_curve.png" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert len(client.get_metric_history(run.info.run_id, "valid_loss")) >= 2
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location.startswith(settings.mlflow_artifacts_dir.as_uri())


def test_a_worse_challenger_is_not_promoted(trained: tuple[Settings, World, TrainReport], client: MlflowClient) -> None:
    settings, world, report = trained
    champion = registry.resolve_champions(client, CTR.name)
    worse = copy.deepcopy(report.vms[CTR.name]["solaris"].model)
    with torch.no_grad():
        worse.mlp[-1].weight.zero_()
        worse.mlp[-1].bias.fill_(2.0)  # predicts 88% clicks for everyone
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    found = vm_eval(worse, data)
    with mlflow.start_run():
        version = register_vm(client, world, CTR, worse, data.matrix(worse.config)[:5], found)
    challenger = Challenger(replace(champion, vm=version), found["ne"])
    decision = promotion_gate(
        client,
        settings,
        [challenger],
        str(world.split.eval),
        lambda p: champion_ne(CTR, p, champion_examples(world, p.fm, p.ae, "cpu", AGE)),
    ).of(CTR.name)
    assert not decision.promoted
    assert decision.champion_ne == pytest.approx(report.vms[CTR.name]["solaris"].metrics["ne"], rel=1e-6)
    assert registry.resolve_champions(client, CTR.name) == champion
    assert "does not beat" in client.get_model_version(VM_MODEL, version).tags["promotion"]
    gate_runs = client.search_runs(
        [client.get_experiment_by_name("solaris-promotion").experiment_id],
        f"params.challenger_vm = '{version}' and params.vm = 'ctr'",
    )
    assert [r.data.tags["promoted"] for r in gate_runs] == ["false"]


def test_mismatched_versions_raise_naming_both(trained: tuple[Settings, World, TrainReport]) -> None:
    _, world, report = trained
    fm, ae = report.fm, report.ae
    message = f"AE version {ae.version} compresses FM version {fm.version}, not FM version 99"
    with pytest.raises(VersionMismatch, match=message):
        Teacher(fm.model, ae.model, "99", ae.version, "cpu")
    teacher = Teacher(fm.model, ae.model, fm.version, ae.version, "cpu")
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    vm = report.vms[CTR.name]["solaris"].model
    other = replace(vm.config, embedding_version="fm99-ae98-d32")
    message = f"expects embedding version fm99-ae98-d32, got embeddings of version fm{fm.version}-ae{ae.version}-d32"
    with pytest.raises(VersionMismatch, match=message):
        data.matrix(other)


def test_every_configured_vm_is_its_own_champion_on_one_embedding_version(
    trained: tuple[Settings, World, TrainReport], client: MlflowClient
) -> None:
    """ctr learns clicks, cvr conversions (the FM's conversion head its distillation target), both read the
    table of one FM and AE."""
    _, world, report = trained
    ctr, cvr = (registry.resolve_champions(client, spec.name) for spec in (CTR, CVR))
    assert ctr.embedding_version == cvr.embedding_version and (ctr.fm, ctr.ae) == (cvr.fm, cvr.ae)
    assert client.get_model_version(CVR.registered_name, cvr.vm).tags["label"] == "conversion"
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    served = report.vms[CVR.name]["solaris"]
    assert vm_eval(served.model, data.for_vm(CVR))["ne"] == pytest.approx(served.metrics["ne"], rel=1e-6)
    conversions, clicks = data.for_vm(CVR).label, data.for_vm(CTR).label
    assert 0 < conversions.sum() < clicks.sum() and np.all(conversions <= clicks)  # a conversion follows a click


def test_cli_trains_one_vm_alone_on_the_champion_embeddings_and_gates_only_it(
    trained: tuple[Settings, World, TrainReport],
    client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings, _, report = trained
    for key in [k for k in os.environ if k.startswith("SOLARIS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SOLARIS_HOME", str(settings.home))
    argv = ["train", "vm", "--vm", "cvr", "--variant", "solaris", "--name", "tiny", "--epochs", "1", "--threads", "1"]
    aliases = [(spec.registered_name, alias) for spec in (CTR, CVR) for alias in (CHAMPION, CHALLENGER)]
    before = {key: str(client.get_model_version_by_alias(*key).version) for key in aliases}
    try:
        assert main([*argv, "--no-progress"]) == 0
        *trained_lines, decision = capsys.readouterr().out.strip().splitlines()
        printed = json.loads(trained_lines[-1])
        assert printed["model"] == "solaris-vm-cvr (solaris)"
        tags = client.get_model_version(CVR.registered_name, printed["version"]).tags
        assert tags["embedding_version"] == f"fm{report.fm.version}-ae{report.ae.version}-d32"
        assert (tags["vm"], tags["label"]) == ("cvr", "conversion") and "promotion" in tags
        assert str(client.get_model_version_by_alias(CVR.registered_name, CHALLENGER).version) == printed["version"]
        assert json.loads(decision)["reason"].startswith("cvr: challenger NE")
        for key in aliases[:2]:  # ctr's aliases never move when cvr trains alone
            assert str(client.get_model_version_by_alias(*key).version) == before[key]
    finally:  # the trained set is shared by the whole session
        for (name, alias), version in before.items():
            registry.set_alias(client, name, alias, version)
