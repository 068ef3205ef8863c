"""One service serving both configured VMs from one store: each follows its own champion, a request names
its VM (an unknown name is a 422 listing the served ones), and /metrics counts each apart."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from conftest import Layout, T
from fastapi.testclient import TestClient

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.champion import ChampionWatcher
from solaris.serving.servedlog import read_served, served_dir
from solaris.store import FeatureStore
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION
from solaris.training.jobs import TrainReport, World
from solaris.vms import DEFAULT_VMS

CTR, CVR = DEFAULT_VMS
CONFIG = ServiceConfig(poll_seconds=3600)  # refreshed by the tests only
HOUR = timedelta(hours=1)
Trained = tuple[Settings, World, TrainReport]


@pytest.fixture
def registry_client(trained: Trained) -> Iterator[MlflowClient]:
    """The session's registry; both VMs' champion aliases are put back afterwards (tests share them)."""
    client = registry.connect(trained[0])
    before = {spec: registry.resolve_champions(client, spec.name).vm for spec in DEFAULT_VMS}
    yield client
    for spec, version in before.items():
        registry.set_alias(client, spec.registered_name, CHAMPION, version)


@pytest.fixture
def both(layout: Layout, registry_client: MlflowClient) -> Iterator[tuple[TestClient, dict[str, ChampionWatcher]]]:
    watchers = {spec.name: ChampionWatcher(registry_client, spec.name) for spec in DEFAULT_VMS}
    service = build_service(layout.store, watchers, CONFIG)
    with TestClient(create_app(service, CONFIG)) as client:
        yield client, watchers


def rank(client: TestClient, **fields: object) -> dict:
    answer = client.post("/rank", json={"user_id": 1, "items": [10, 11, 30], "at": T.isoformat(), **fields})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_each_vm_serves_its_own_champion_from_the_one_table(
    both: tuple[TestClient, dict[str, ChampionWatcher]], trained: Trained, layout: Layout
) -> None:
    client, _ = both
    lead, ctr, cvr = rank(client), rank(client, vm="ctr"), rank(client, vm="cvr")

    report = trained[2]
    assert (lead["vm"], ctr["vm"], cvr["vm"]) == ("ctr", "ctr", "cvr")  # no vm named: the lead
    assert lead["vm_version"] == ctr["vm_version"] == report.vms["ctr"]["solaris"].version
    assert cvr["vm_version"] == report.vms["cvr"]["solaris"].version
    assert ctr["embedding_version"] == cvr["embedding_version"] == layout.version
    assert ctr["tiers"] == cvr["tiers"] == ["pair", "agg", "agg"]  # one read of the same rows
    assert np.mean(cvr["scores"]) < np.mean(ctr["scores"])  # a conversion is rarer than a click
    ready = client.get("/readyz").json()
    assert set(ready["vms"]) == {"ctr", "cvr"} and ready["vm_version"] == ctr["vm_version"]
    metrics = client.get("/metrics").text
    for vm, requests in (("ctr", 2), ("cvr", 1)):
        assert f'solaris_rank_seconds_count{{stage="total",vm="{vm}"}} {requests:.1f}' in metrics
        assert f'solaris_rank_candidates_total{{tier="agg",vm="{vm}"}} {2 * requests:.1f}' in metrics


def test_an_unknown_vm_is_a_422_naming_the_served_ones(both: tuple[TestClient, dict[str, ChampionWatcher]]) -> None:
    client, _ = both
    answer = client.post("/rank", json={"user_id": 1, "items": [10], "vm": "ctx"})

    assert answer.status_code == 422
    assert "'ctr' or 'cvr'" in answer.text and "vm" in answer.text


def test_moving_one_vms_champion_swaps_it_alone(
    both: tuple[TestClient, dict[str, ChampionWatcher]], trained: Trained, registry_client: MlflowClient
) -> None:
    client, watchers = both
    before = {vm: rank(client, vm=vm)["vm_version"] for vm in ("ctr", "cvr")}
    client.get("/metrics")  # a scrape while the first versions serve
    moved = trained[2].vms["cvr"]["solaris_distilled"].version
    registry.set_alias(registry_client, CVR.registered_name, CHAMPION, moved)

    for watcher in watchers.values():
        watcher.refresh(wait=True)

    assert rank(client, vm="cvr")["vm_version"] == moved != before["cvr"]
    assert rank(client, vm="ctr")["vm_version"] == before["ctr"]
    metrics = client.get("/metrics").text
    assert (
        f'vm="cvr",vm_version="{moved}"}} 1.0' in metrics and f'vm="cvr",vm_version="{before["cvr"]}"}} 0.0' in metrics
    )
    assert f'vm="ctr",vm_version="{before["ctr"]}"}} 1.0' in metrics


def test_every_vm_on_a_store_without_its_embedding_version_serves_tier_none_and_says_why(
    make_store: Callable[[], FeatureStore], registry_client: MlflowClient
) -> None:
    """A store that holds no embedding version (nothing precomputed for the champions' FM and AE): each VM loads
    its champion, is degraded naming the version it reads, and answers tier none; no load is counted failed."""
    watchers = {spec.name: ChampionWatcher(registry_client, spec.name) for spec in DEFAULT_VMS}
    with TestClient(create_app(build_service(make_store(), watchers, CONFIG), CONFIG)) as client:
        ready = client.get("/readyz")
        answers = {spec.name: rank(client, vm=spec.name) for spec in DEFAULT_VMS}
        metrics = client.get("/metrics").text

    assert ready.status_code == 200 and ready.json()["status"] == "degraded"
    for spec in DEFAULT_VMS:
        champion = registry.resolve_champions(registry_client, spec.name)
        assert ready.json()["vms"][spec.name]["vm_version"] == champion.vm
        assert (
            f"embedding version {champion.embedding_version} is not in the feature store"
            in (ready.json()["degraded"][spec.name])
        )
        assert set(answers[spec.name]["tiers"]) == {"none"} and answers[spec.name]["store"] == "version_missing"
        assert f'solaris_champion_refresh_failures_total{{stage="load",vm="{spec.name}"}} 0.0' in metrics
        assert f'solaris_ranker_degraded{{reason="version_missing",vm="{spec.name}"}} 1.0' in metrics


def test_each_vm_logs_its_features_as_served_in_its_own_dataset(
    layout: Layout, registry_client: MlflowClient, tmp_path: Path
) -> None:
    config = ServiceConfig(poll_seconds=3600, served_log_dir=tmp_path / "served", served_log_flush_rows=1)
    watchers = {spec.name: ChampionWatcher(registry_client, spec.name) for spec in DEFAULT_VMS}
    with TestClient(create_app(build_service(layout.store, watchers, config), config)) as client:
        answers = {vm: rank(client, vm=vm) for vm in ("ctr", "cvr")}
        rank(client, vm="cvr")
    # stopping the service wrote every answered request's rows

    for vm, requests in (("ctr", 1), ("cvr", 2)):
        rows = read_served(served_dir(tmp_path / "served", vm), T - HOUR, T + HOUR, watchers[vm].current.code_dim)
        assert rows.num_rows == 3 * requests
        assert set(rows["vm_version"].to_pylist()) == {answers[vm]["vm_version"]}
        # each request's rows are one part file, named at random: the first answer's may come second
        scores = rows["score"].to_pylist()
        logged = [scores[i : i + 3] for i in range(0, len(scores), 3)]
        assert any(request == pytest.approx(answers[vm]["scores"], rel=1e-6) for request in logged)
