"""MLflow's SQLite file deleted or replaced under an open process (issue #17 item 11).

"attempt to write a readonly database" came from here: MLflow keeps, per tracking URI, an engine whose pooled
connections stay open on the database file. A replay wipes its output folder (MLflow database included) and
trains again in the same process, so training's first write went to the old, unlinked file. Each test does
what such a process does, with ``registry.connect`` before each use as the jobs do.
"""

from __future__ import annotations

import os
import shutil
from collections.abc import Iterator
from pathlib import Path

import pytest
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore
from mlflow_state import own_registry

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.tracking import registry


@pytest.fixture
def client(settings: Settings) -> Iterator[MlflowClient]:
    with own_registry(settings) as own:
        yield own


def db_path(settings: Settings) -> Path:
    return Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///"))


def log_a_run(settings: Settings, experiment: str) -> str:
    """What a training job writes first: its experiment, a run with a metric, a registered model."""
    client = registry.connect(settings)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, experiment))
    with mlflow.start_run() as run:
        mlflow.log_metric("loss", 0.5)
    client.create_registered_model(f"{experiment}-model")
    return run.info.run_id


def test_a_job_logs_again_after_the_mlflow_folder_is_wiped_in_the_same_process(
    client: MlflowClient, settings: Settings
) -> None:
    first = log_a_run(settings, "solaris-train-fm")
    shutil.rmtree(db_path(settings).parent)  # what a replay does to its output folder before it starts over

    second = log_a_run(settings, "solaris-train-fm")  # failed: attempt to write a readonly database
    fresh = registry.connect(settings)
    experiment = fresh.get_experiment_by_name("solaris-train-fm").experiment_id
    assert [r.info.run_id for r in fresh.search_runs([experiment])] == [second]
    assert first != second
    assert [m.name for m in fresh.search_registered_models()] == ["solaris-train-fm-model"]


def test_a_database_file_replaced_under_an_open_process_is_the_one_read_and_written(
    client: MlflowClient, settings: Settings, tmp_path: Path
) -> None:
    log_a_run(settings, "before")
    db = db_path(settings)
    engine = SqlAlchemyStore._engine_map[settings.mlflow_tracking_uri]
    shutil.copyfile(db, tmp_path / "backup.db")
    log_a_run(settings, "after")
    assert SqlAlchemyStore._engine_map[settings.mlflow_tracking_uri] is engine  # same file: same connections

    os.replace(tmp_path / "backup.db", db)  # a restore: another file now has the name
    restored = registry.connect(settings)
    assert restored.get_experiment_by_name("after") is None  # was read from the old file
    assert restored.get_experiment_by_name("before") is not None
    log_a_run(settings, "after")  # failed: attempt to write a readonly database
    assert {m.name for m in restored.search_registered_models()} == {"before-model", "after-model"}
