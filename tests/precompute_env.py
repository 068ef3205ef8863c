"""Settings for a test's precompute runs: its own data folder and store, the session's world and models; and
copies of those models registered as a new chain."""

from __future__ import annotations

import copy
import os
from datetime import datetime, timedelta
from pathlib import Path

import pytest

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.models.features import fm_matrix
from solaris.precompute.run import run_hour
from solaris.store import FeatureStore, open_store
from solaris.store.records import RunRecord
from solaris.tracking import registry
from solaris.tracking.registry import PinnedVersions
from solaris.training.jobs import TrainReport, World
from solaris.vms import DEFAULT_VMS

WORLD = "tiny"
LEAD = DEFAULT_VMS[0]  # the VM the precompute pins and the ranker serves


def precompute_settings(trained: Settings, home: Path, store_url: str | None = None) -> Settings:
    """Staging, code log, KNN state and store under ``home``; world and MLflow shared with ``trained``.

    The world is linked, not copied: runs only read it.
    """
    data_dir = home / "var"
    (data_dir / "worlds").mkdir(parents=True)
    os.symlink(trained.world_dir(WORLD), data_dir / "worlds" / WORLD)
    return trained.with_overrides(
        home=home,
        data_dir=data_dir,
        store_url=store_url or f"sqlite:///{data_dir / 'feature_store.db'}",
        world=WORLD,
        device="cpu",
    )


def export(settings: Settings, monkeypatch: pytest.MonkeyPatch) -> None:
    """Make ``settings`` what ``Settings.from_env()`` returns in this process (Airflow tasks read it)."""
    for key in [k for k in os.environ if k.startswith("SOLARIS_") and k != "SOLARIS_TEST_PG_URL"]:
        monkeypatch.delenv(key)
    for key, value in settings.as_env().items():
        monkeypatch.setenv(key, value)


def backend_settings(request: pytest.FixtureRequest, trained: Settings, home: Path, schema_prefix: str) -> Settings:
    """:func:`precompute_settings` on the parametrized backend: SQLite, or PostgreSQL in a schema of the test's own."""
    url = None
    if request.param == "postgres":
        schema = f"{schema_prefix}_{home.name.lower().replace('-', '_')[-40:]}"
        url = request.getfixturevalue("pg_url") + f"?schema={schema}"
    return precompute_settings(trained, home, url)


def store_rows(store: FeatureStore, sql: str) -> list[tuple]:
    """The rows of a raw query on the store's database (a test reads tables the interface does not list)."""
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        return [tuple(row) for row in conn.exec_driver_sql(sql)]


def run_succeeded_hour(settings: Settings, hour: datetime, params: dict[str, object]) -> tuple[dict, RunRecord]:
    """``run_hour`` at ``hour`` (its clock too) and its run record, which must say succeeded; ``hour`` has a day
    of the world's history before it, so that every tier has something to read."""
    assert hour - EventLog(settings.world_dir()).start >= timedelta(hours=24)
    done = run_hour(settings, hour, params, clock=lambda: hour)
    with open_store(settings.store_url) as store:
        record = store.get_run(done["run_key"])
    assert record is not None and record.status == "succeeded", record
    return done, record


def copy_chain(client: MlflowClient, settings: Settings, world: World, report: TrainReport) -> PinnedVersions:
    """Register copies of the trained FM, AE and the lead's served VM as a new chain (what a retraining would add)."""
    fm, ae = report.fm.model, copy.deepcopy(report.ae.model)
    vm = copy.deepcopy(report.vms[LEAD.name]["solaris"].model)
    sample = world.log.impressions(world.split.eval.start, world.split.eval.end).slice(0, 5)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-test-promotion"))
    with mlflow.start_run():
        return registry.log_chain(client, fm, ae, vm, fm_matrix(sample, world.index, fm.config.history), LEAD.name)
