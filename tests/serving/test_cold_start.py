"""A ranker on a store that does not hold its champion's embedding version (a new stack before its first
precompute, a store re-created) serves every candidate tier none and says it is degraded; it upgrades by
itself once a precompute writes the version. A store holding that version with another dimension is refused."""

from __future__ import annotations

import os
import signal
import time
from pathlib import Path
from typing import Any

import httpx
import sqlalchemy as sa
from conftest import Layout, T, lay_out, one_vm
from fastapi.testclient import TestClient
from precompute_env import LEAD
from serve_process import start_serve

from solaris.config import Settings
from solaris.serving import Ranker
from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.champion import ChampionWatcher, ServingModel
from solaris.store import FeatureStore
from solaris.training.jobs import TrainReport, World

CONFIG = ServiceConfig(max_candidates=50, poll_seconds=10.0)  # degraded: looked at again after 1 s
DEGRADED_GAUGE = f'solaris_ranker_degraded{{reason="version_missing",vm="{LEAD.name}"}}'


def gauge(client: TestClient) -> float:
    line = next(ln for ln in client.get("/metrics").text.splitlines() if ln.startswith(DEGRADED_GAUGE))
    return float(line.split()[-1])


def test_a_store_without_the_version_serves_tier_none_then_upgrades_once_it_is_written(
    make_store: Any, champion: ServingModel
) -> None:
    store = make_store()  # initialised, empty: no precompute has run
    service = one_vm(Ranker(store, champion, store_timeout_s=1.0), CONFIG.poll_seconds)
    with TestClient(create_app(service, CONFIG)) as client:
        answer = client.post("/rank", json={"user_id": 1, "items": [11, 10], "at": T.isoformat()})
        assert answer.status_code == 200
        assert answer.json()["tiers"] == ["none", "none"] and answer.json()["store"] == "version_missing"
        ready = client.get("/readyz")
        assert ready.status_code == 200 and ready.json()["status"] == "degraded"
        assert champion.pinned.embedding_version in ready.json()["degraded"][LEAD.name]
        assert gauge(client) == 1.0

        layout: Layout = lay_out(store, champion)  # the first precompute writes the version
        deadline = time.monotonic() + 20
        while client.get("/readyz").json()["status"] != "ready" and time.monotonic() < deadline:
            time.sleep(0.1)
        assert client.get("/readyz").json() == {
            "status": "ready",
            "vm_version": champion.pinned.vm,
            "embedding_version": layout.version,
            "vms": {LEAD.name: {"vm_version": champion.pinned.vm, "embedding_version": layout.version}},
            "degraded": {},
        }
        answer = client.post("/rank", json={"user_id": 1, "items": [11, 10], "at": T.isoformat()})
        assert answer.json()["tiers"] == ["agg", "pair"] and answer.json()["store"] == "ok"
        assert gauge(client) == 0.0


class FixedChampion(ChampionWatcher):
    """``@champion`` names version 1, which loads as the session's champion."""

    def __init__(self, model: ServingModel) -> None:
        super().__init__(None, LEAD.name, load=lambda *_: model)  # type: ignore[arg-type]

    def champion_version(self) -> str | None:
        return "1"


def test_a_store_holding_the_version_with_another_dimension_refuses_the_champion_by_name(
    make_store: Any, champion: ServingModel
) -> None:
    store: FeatureStore = make_store()
    version = lay_out(store, champion).version
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.exec_driver_sql(f"UPDATE embedding_versions SET dim = 2 * dim WHERE version_id = '{version}'")
    conflicting = make_store(same_as=store)  # a ranker's own handle: nothing cached from the writes
    watcher = FixedChampion(champion)
    service = build_service(conflicting, {LEAD.name: watcher}, CONFIG)
    with TestClient(create_app(service, CONFIG)) as client:
        ready = client.get("/readyz")
        assert watcher.current is None
        assert ready.status_code == 503
        assert f"reads embedding version {version} as dim {champion.code_dim}" in ready.json()["detail"]
        assert f"holds it as dim {2 * champion.code_dim}" in ready.json()["detail"]


def test_solaris_serve_creates_a_missing_stores_tables_and_serves_degraded(
    trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    """What a new user meets: a trained champion, no precompute yet, not even the store's tables."""
    store_file = tmp_path / "never-initialised.db"
    settings = trained[0].with_overrides(data_dir=tmp_path / "var", store_url=f"sqlite:///{store_file}")
    server, base = start_serve(settings, "--no-served-log")  # once /readyz answers 200
    try:
        ready = httpx.get(f"{base}/readyz").json()
        answer = httpx.post(f"{base}/rank", json={"user_id": 1, "items": [10, 11], "at": T.isoformat()})
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
    assert ready["status"] == "degraded" and LEAD.name in ready["degraded"]
    assert answer.status_code == 200 and answer.json()["tiers"] == ["none", "none"]
    assert "embedding_versions" in sa.inspect(sa.create_engine(f"sqlite:///{store_file}")).get_table_names()
