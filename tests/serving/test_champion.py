"""The ranker follows solaris-vm@champion: a moved alias loads in the background and swaps atomically; a
request never pairs one VM with another version's embeddings; a bad champion never replaces a good one."""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from conftest import Layout, T, lay_out
from fastapi.testclient import TestClient
from mlflow_state import mlflow_http_server
from precompute_env import LEAD
from tcp_proxy import TcpProxy

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.serving import Ranker
from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.champion import ChampionWatcher, ServingModel, load_serving_model
from solaris.store import SqliteStoreConfig, open_store
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION
from solaris.training.jobs import TrainReport, World

Trained = tuple[Settings, World, TrainReport]


@pytest.fixture
def restore_champion(trained: Trained) -> Iterator[MlflowClient]:
    """A client on the session's registry; the champion alias is put back afterwards (tests share it)."""
    client = registry.connect(trained[0])
    original = registry.resolve_champions(client, LEAD.name).vm
    yield client
    registry.set_alias(client, LEAD.registered_name, CHAMPION, original)


@pytest.fixture
def watcher(restore_champion: MlflowClient) -> ChampionWatcher:
    """A watcher on the session's registry."""
    return ChampionWatcher(restore_champion, LEAD.name)


def move_champion(trained: Trained, variant: str) -> str:
    version = trained[2].vms[LEAD.name][variant].version
    registry.set_alias(registry.connect(trained[0]), LEAD.registered_name, CHAMPION, version)
    return version


def test_a_moved_alias_loads_the_new_vm(trained: Trained, watcher: ChampionWatcher, layout: Layout) -> None:
    watcher.refresh(wait=True)
    ranker = Ranker(layout.store, watcher)
    before = ranker.rank(1, np.array([10, 11]), T)

    new = move_champion(trained, "solaris_distilled")
    assert ranker.rank(1, np.array([10, 11]), T).vm_version == before.vm_version  # not before the load
    watcher.refresh(wait=True)
    after = ranker.rank(1, np.array([10, 11]), T)

    assert after.vm_version == new != before.vm_version
    assert after.embedding_version == before.embedding_version == layout.version
    assert not np.array_equal(after.scores, before.scores)


def test_a_champion_that_cannot_serve_keeps_the_current_vm(trained: Trained, watcher: ChampionWatcher) -> None:
    watcher.refresh(wait=True)
    serving = watcher.current
    move_champion(trained, "base")  # a VM without embeddings cannot serve the feature store's tiers
    watcher.refresh(wait=True)

    assert watcher.current is serving
    assert "embedding_version" in (watcher.last_error or "")


def test_requests_during_swaps_never_mix_a_vm_with_another_version(
    trained: Trained, watcher: ChampionWatcher, layout: Layout
) -> None:
    client = registry.connect(trained[0])
    variants = ("solaris", "solaris_distilled")
    versions = [trained[2].vms[LEAD.name][v].version for v in variants]
    models = {version: load_serving_model(client, LEAD.name, version) for version in versions}
    watcher.refresh(wait=True)
    ranker = Ranker(layout.store, watcher)
    served, stop = [], threading.Event()

    def serve() -> None:
        while not stop.is_set():
            served.append(ranker.rank(1, np.array([10, 11, 12]), T))

    threads = [threading.Thread(target=serve) for _ in range(3)]
    for thread in threads:
        thread.start()
    for i in range(6):
        move_champion(trained, variants[i % 2])
        watcher.refresh(wait=True)
    stop.set()
    for thread in threads:
        thread.join()

    assert {s.vm_version for s in served} == set(models)
    for s in served:
        model: ServingModel = models[s.vm_version]
        assert s.embedding_version == model.pinned.embedding_version
        with torch.inference_mode():
            np.testing.assert_allclose(s.scores, model.vm(torch.from_numpy(s.inputs)).numpy(), rtol=1e-6)


def refresh_failures(metrics: str, stage: str) -> float:
    prefix = f'solaris_champion_refresh_failures_total{{stage="{stage}",vm="{LEAD.name}"}}'
    [line] = [ln for ln in metrics.splitlines() if ln.startswith(prefix)]
    return float(line.split()[-1])


def test_mlflow_unreachable_keeps_the_vm_serving_counts_the_failure_and_recovers(
    trained: Trained,
    restore_champion: MlflowClient,
    champion: ServingModel,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """MLflow as a server reached through a proxy the test cuts: a refresh while it is away fails, is logged
    and counted in /metrics, and the service keeps answering with the VM it has; once MLflow answers again the
    next refresh loads the champion that moved meanwhile. (An unreachable MLflow used to be taken for "no
    champion": nothing logged, nothing counted.)"""
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # fail at once, not after minutes of backoff
    store = lay_out(open_store(SqliteStoreConfig(tmp_path / "store.db"), init=True), champion).store
    records: list[logging.LogRecord] = []
    handler = logging.Handler(logging.WARNING)
    handler.emit = records.append  # type: ignore[method-assign]
    logging.getLogger("solaris.serving.champion").addHandler(handler)
    request = {"user_id": 1, "items": [10, 11], "at": T.isoformat()}
    config = ServiceConfig(poll_seconds=3600)  # refreshed by the test only
    with mlflow_http_server(trained[0].mlflow_tracking_uri) as port:
        proxy = TcpProxy(port)
        url = f"http://127.0.0.1:{proxy.port}"
        service = build_service(store, {LEAD.name: ChampionWatcher(MlflowClient(url, url), LEAD.name)}, config)
        try:
            with TestClient(create_app(service, config)) as client:  # starting loads @champion through the proxy
                serving = client.post("/rank", json=request).json()["vm_version"]
                assert serving == champion.pinned.vm

                proxy.down()
                moved = move_champion(trained, "solaris_distilled")
                service.watchers[LEAD.name].refresh(wait=True)
                cut = client.post("/rank", json=request)
                metrics = client.get("/metrics").text
                assert cut.status_code == 200 and cut.json()["vm_version"] == serving != moved
                assert refresh_failures(metrics, "resolve") == 1 and refresh_failures(metrics, "load") == 0
                assert f"resolving @{CHAMPION}" in (service.watchers[LEAD.name].last_error or "")
                assert any(f"resolving @{CHAMPION}" in r.getMessage() for r in records)
                assert client.get("/readyz").status_code == 200

                proxy.up()
                service.watchers[LEAD.name].refresh(wait=True)
                assert client.post("/rank", json=request).json()["vm_version"] == moved
                assert service.watchers[LEAD.name].last_error is None
                assert refresh_failures(client.get("/metrics").text, "resolve") == 1
        finally:
            logging.getLogger("solaris.serving.champion").removeHandler(handler)
            proxy.close()
            store.close()
