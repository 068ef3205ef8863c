"""A small known world for the health report: a SQLite store with rows and run records at known times, and
a local MLflow store with precompute figures and, when asked, a champion chain.

Rows sit on both sides of each boundary the report draws at ``T``: expired exactly at ``T``, expiring
exactly at ``T + 1 h`` (inside "the next hour") and a microsecond later (outside).
"""

from __future__ import annotations

import socket
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta

import numpy as np

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.embedding_version import embedding_version
from solaris.precompute.summary import EXPERIMENT
from solaris.store import FeatureStore, open_store
from solaris.tracking import registry
from solaris.vms import DEFAULT_VMS

VMS = [spec.name for spec in DEFAULT_VMS]

FELL_BACK = "budget asked for, but demand model v3's validation AUC 0.650 is under demand_auc_floor 0.72"
T = datetime(2026, 3, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)
DIM = 8
CHAMPION_FM, CHAMPION_AE = "1", "1"  # what register_champion gets on a fresh registry
OLDER = ("3", "1")


@dataclass(frozen=True)
class Batch:
    """Pair rows written by one run: how many, when made, when they expire."""

    n: int
    created_at: datetime
    expires_at: datetime


@dataclass(frozen=True)
class HealthWorld:
    settings: Settings
    champion_version: str  # the embedding version the champion chain would name
    older_version: str
    pair_batches: list[Batch]  # of champion_version
    run_keys_newest_first: list[str]
    figures: dict[str, dict[str, float]]  # the latest figures logged per run key


PAIR_BATCHES = [
    Batch(5, T - 4 * HOUR, T),  # expired exactly at T
    Batch(3, T - 3 * HOUR, T + HOUR),  # expires at the end of the next hour: counted as expiring
    Batch(2, T - 2.5 * HOUR, T + HOUR + timedelta(microseconds=1)),  # a microsecond later: not
    Batch(4, T - HOUR, T + 3 * HOUR),
]


def _vectors(n: int) -> np.ndarray:
    return np.random.default_rng(n).normal(size=(n, DIM)).astype(np.float32)


def write_store(store: FeatureStore) -> tuple[str, str]:
    """Rows of two embedding versions and three run records (hours 9, 10, 11; the last one failed)."""
    current = store.register_embedding_version(CHAMPION_FM, CHAMPION_AE, DIM, created_at=T - 5 * HOUR)
    older = store.register_embedding_version(*OLDER, DIM, created_at=T - 30 * HOUR)
    next_user = 0
    for batch in PAIR_BATCHES:
        users = np.arange(next_user, next_user + batch.n)
        next_user += batch.n
        store.write_pair_embeddings(
            "run", current, users, users + 100, _vectors(batch.n), np.ones(batch.n), batch.created_at, batch.expires_at
        )
    store.write_user_aggregates(
        "run", current, np.arange(3), _vectors(3), np.ones(3, dtype=np.int64), 24, T - HOUR, T + HOUR / 2
    )
    old_ids = np.arange(6)
    store.write_pair_embeddings("old", older, old_ids, old_ids, _vectors(6), np.ones(6), T - 30 * HOUR, T - 26 * HOUR)
    chains = {older: OLDER, current: (CHAMPION_FM, CHAMPION_AE)}
    for hour, version, status in ((9, older, "succeeded"), (10, current, "succeeded"), (11, current, "failed")):
        start = T.replace(hour=hour)
        key = run_key(hour)
        selector = ("verifier", FELL_BACK) if hour == 10 else ("budget", "asked for")
        store.start_run(key, start, start + HOUR, *chains[version], "7", version, start + HOUR, *selector)
        counts = {"pairs_written": hour * 10, "selected": hour * 20} if status == "succeeded" else {}
        timings = {"resolve": 0.5, "embed": hour / 10} if status == "succeeded" else {}
        store.finish_run(key, status, counts, timings, finished_at=start + HOUR + timedelta(minutes=3))
    return current, older


def add_run(settings: Settings, hour: int, status: str, started_at: datetime) -> str:
    """One more run record, of the champion version for ``hour``, started at ``started_at``; left ``running``
    or finished three minutes later with ``status``. Returns its run key."""
    key, start = run_key(hour), T.replace(hour=hour)
    version = embedding_version(CHAMPION_FM, CHAMPION_AE, DIM)
    with open_store(settings.store_url) as store:
        store.start_run(key, start, start + HOUR, CHAMPION_FM, CHAMPION_AE, "7", version, started_at=started_at)
        if status != "running":
            store.finish_run(key, status, {}, {}, finished_at=started_at + timedelta(minutes=3))
    return key


def closed_port() -> int:
    """A local port nothing listens on (bound, then released)."""
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def run_key(hour: int) -> str:
    return f"hourly__2026-03-01T{hour:02d}"


def log_figures(client: MlflowClient, settings: Settings, key: str, metrics: dict[str, float], start_ms: int) -> None:
    """One finished MLflow run of the precompute experiment, tagged with its run key as the precompute does."""
    experiment = registry.experiment(client, settings, EXPERIMENT)
    run = client.create_run(experiment, start_time=start_ms, tags={"run_key": key}, run_name=key)
    for name, value in metrics.items():
        client.log_metric(run.info.run_id, name, value)
    client.set_terminated(run.info.run_id)


def register_champion(client: MlflowClient) -> str:
    """An FM, an AE and a VM version, tagged and aliased @champion as training does; no model files needed.

    On a fresh registry each is version 1, so the chain names the store's ``fm1-ae1-d8`` rows.
    """
    fm = _register(client, registry.FM_MODEL, {"role": "fm"})
    ae = _register(client, registry.AE_MODEL, {"role": "ae", "fm_version": fm})
    emb = embedding_version(fm, ae, DIM)
    for spec in DEFAULT_VMS:  # every configured VM reads the one table
        _register(client, spec.registered_name, {"role": "vm", "embedding_version": emb})
    return emb


def _register(client: MlflowClient, name: str, tags: dict[str, str]) -> str:
    client.create_registered_model(name)
    version = client.create_model_version(name, source="file:///nowhere", tags=tags).version
    client.set_registered_model_alias(name, registry.CHAMPION, version)
    return str(version)
