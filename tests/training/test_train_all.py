"""The whole training chain on the tiny world, then the registry as the precompute and the ranker see it.

One session-wide run of ``train_all`` (the ``trained`` fixture in tests/conftest.py, about a minute on 2
cores) is shared by every test here and by the precompute and DAG tests.
"""

from __future__ import annotations

import copy
import json
import os
from dataclasses import replace

import mlflow
import numpy as np
import pandas as pd
import pytest
import torch
from mlflow import MlflowClient

from solaris.cli import main
from solaris.config import Settings
from solaris.models.vm import score
from solaris.models.vm_data import Teacher, build_vm_data
from solaris.tracking import registry
from solaris.training.gate import promotion_gate
from solaris.training.jobs import TrainPlan, TrainReport, World, champion_ne, register_vm, vm_eval
from solaris.tracking.registry import AE_MODEL, CHALLENGER, CHAMPION, DEMAND_MODEL, FM_MODEL, VM_MODEL, PinnedVersions
from solaris.embedding_version import VersionMismatch

AGE = TrainPlan().served_age_hours  # the served pair codes' age the session's training validated on


@pytest.fixture
def client(trained: tuple[Settings, World, TrainReport]) -> MlflowClient:
    return registry.connect(trained[0])


def test_fm_beats_the_base_vm_on_held_out_hours(trained: tuple[Settings, World, TrainReport]) -> None:
    _, _, report = trained
    assert report.fm.metrics["ne"] < report.vms["base"].metrics["ne"]
    assert report.fm.metrics["flops_per_pair"] > 10 * report.vms["base"].metrics["flops_per_pair"]


def test_champion_vm_from_the_registry_scores_like_the_in_process_one(
    trained: tuple[Settings, World, TrainReport], client: MlflowClient
) -> None:
    _, world, report = trained
    pinned = registry.resolve_champions(client)
    served = report.vms["solaris"]
    assert (pinned.fm, pinned.ae, pinned.vm) == (report.fm.version, report.ae.version, served.version)
    teacher = Teacher(
        registry.load_fm(pinned.fm), registry.load_ae(pinned.ae), pinned.fm, pinned.ae, device="cpu"
    )
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    loaded = registry.load_vm(pinned.vm)
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
    assert {m.name for m in client.search_registered_models()} == {FM_MODEL, AE_MODEL, VM_MODEL, DEMAND_MODEL}
    demand = client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION)
    assert demand.tags["role"] == "demand" and 0.5 < float(demand.tags["valid_auc"]) <= 1
    fm, ae, vm = report.fm.version, report.ae.version, report.vms["solaris"].version
    for name, version in ((FM_MODEL, fm), (AE_MODEL, ae), (VM_MODEL, vm)):
        assert str(client.get_model_version_by_alias(name, CHAMPION).version) == version
        assert str(client.get_model_version_by_alias(name, CHALLENGER).version) == version
    assert client.get_model_version(AE_MODEL, ae).tags["fm_version"] == fm
    vm_tags = client.get_model_version(VM_MODEL, vm).tags
    assert vm_tags["embedding_version"] == f"fm{fm}-ae{ae}-d32"
    assert vm_tags["variant"] == "solaris" and float(vm_tags["eval_ne"]) == pytest.approx(
        report.vms["solaris"].metrics["ne"], rel=1e-5
    )
    base_tags = client.get_model_version(VM_MODEL, report.vms["base"].version).tags
    assert "embedding_version" not in base_tags
    run = client.get_run(client.get_model_version(FM_MODEL, fm).run_id)
    assert "loss_curve.png" in {a.path for a in client.list_artifacts(run.info.run_id)}
    assert len(client.get_metric_history(run.info.run_id, "valid_loss")) >= 2
    experiment = client.get_experiment(run.info.experiment_id)
    assert experiment.artifact_location.startswith(settings.mlflow_artifacts_dir.as_uri())


def test_a_worse_challenger_is_not_promoted(
    trained: tuple[Settings, World, TrainReport], client: MlflowClient
) -> None:
    settings, world, report = trained
    champion = registry.resolve_champions(client)
    worse = copy.deepcopy(report.vms["solaris"].model)
    with torch.no_grad():
        worse.mlp[-1].weight.zero_()
        worse.mlp[-1].bias.fill_(2.0)  # predicts 88% clicks for everyone
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, world.split.eval, world.index, teacher, AGE)
    found = vm_eval(worse, data)
    with mlflow.start_run():
        version = register_vm(client, world, worse, data.matrix(worse.config)[:5], found)
    challenger = PinnedVersions(champion.fm, champion.ae, version, champion.embedding_version)
    decision = promotion_gate(
        client, settings, challenger, found["ne"], str(world.split.eval), lambda p: champion_ne(world, p, "cpu", AGE)
    )
    assert not decision.promoted
    assert decision.champion_ne == pytest.approx(report.vms["solaris"].metrics["ne"], rel=1e-6)
    assert registry.resolve_champions(client) == champion
    assert "does not beat" in client.get_model_version(VM_MODEL, version).tags["promotion"]
    gate_runs = client.search_runs(
        [client.get_experiment_by_name("solaris-promotion").experiment_id], f"params.challenger_vm = '{version}'"
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
    vm = report.vms["solaris"].model
    other = replace(vm.config, embedding_version="fm99-ae98-d32")
    message = f"expects embedding version fm99-ae98-d32, got embeddings of version fm{fm.version}-ae{ae.version}-d32"
    with pytest.raises(VersionMismatch, match=message):
        data.matrix(other)


def test_cli_trains_a_vm_on_the_challenger_embeddings(
    trained: tuple[Settings, World, TrainReport],
    client: MlflowClient,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    settings, _, report = trained
    for key in [k for k in os.environ if k.startswith("SOLARIS_")]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SOLARIS_HOME", str(settings.home))
    argv = ["train", "vm", "--variant", "solaris", "--name", "tiny", "--epochs", "1", "--threads", "1"]
    before = str(client.get_model_version_by_alias(VM_MODEL, CHALLENGER).version)
    try:
        assert main([*argv, "--no-progress"]) == 0
        printed = json.loads(capsys.readouterr().out.strip().splitlines()[-1])
        assert printed["model"] == "solaris-vm (solaris)"
        tags = client.get_model_version(VM_MODEL, printed["version"]).tags
        assert tags["embedding_version"] == f"fm{report.fm.version}-ae{report.ae.version}-d32"
        assert str(client.get_model_version_by_alias(VM_MODEL, CHALLENGER).version) == printed["version"]
    finally:  # the trained set is shared by the whole session
        registry.set_alias(client, VM_MODEL, CHALLENGER, before)
