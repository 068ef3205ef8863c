"""The local stack's decisions that need no running service: refusals, the metadata DB choice, the MLflow
server's configuration."""

from __future__ import annotations

import os
import socket
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psycopg
import pytest

from solaris.config import Settings
from solaris.ops import celery_workers, mlflow_server
from solaris.ops.health import free_ports
from solaris.ops.stack import StackConfig, StackError, choose_metadata_url, close_runs_left_running, up
from solaris.ops.stack_state import state_path
from solaris.store import open_configured_store

SOLARIS = Path(sys.executable).with_name("solaris")


def _clean_env() -> dict[str, str]:
    return {k: v for k, v in os.environ.items() if not k.startswith(("SOLARIS_", "AIRFLOW"))}


def test_up_refuses_a_taken_port_and_starts_nothing(settings: Settings) -> None:
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        taken = held.getsockname()[1]
        free = free_ports("127.0.0.1", 2)
        done = subprocess.run(
            [
                str(SOLARIS),
                "stack",
                "up",
                "--sqlite",
                "--airflow-port",
                str(free[0]),
                "--mlflow-port",
                str(taken),
                "--ranker-port",
                str(free[1]),
            ],
            env=_clean_env() | settings.as_env(),
            capture_output=True,
            text=True,
            timeout=60,
        )
    assert done.returncode == 1
    assert f"mlflow port {taken}" in done.stderr and "airflow port" not in done.stderr
    assert not state_path(settings).exists()


def test_metadata_db_falls_back_to_sqlite_when_postgres_does_not_answer(settings: Settings) -> None:
    (closed,) = free_ports("127.0.0.1", 1)
    config = StackConfig(postgres_admin_url=f"postgresql+psycopg://postgres@127.0.0.1:{closed}/postgres")
    assert choose_metadata_url(settings, config) == f"sqlite:///{settings.airflow_home / 'airflow.db'}"
    explicit = "postgresql+psycopg://someone@db.example/airflow"
    assert choose_metadata_url(settings, StackConfig(metadata_url=explicit)) == explicit


def test_metadata_db_is_created_on_postgres_when_missing(settings: Settings, pg_url: str) -> None:
    config = StackConfig(postgres_admin_url=pg_url, airflow_database=f"{pg_url.rsplit('/', 1)[1]}_airflow")
    url = choose_metadata_url(settings, config)
    assert url == pg_url.rsplit("/", 1)[0] + f"/{config.airflow_database}"
    assert choose_metadata_url(settings, config) == url  # a second stack reuses it
    with psycopg.connect(pg_url.replace("+psycopg", ""), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE "{config.airflow_database}"')


def test_metadata_db_name_is_checked(settings: Settings) -> None:
    with pytest.raises(ValueError, match="Airflow database name"):
        choose_metadata_url(settings, StackConfig(airflow_database="airflow; DROP"))


def test_mlflow_server_serves_the_settings_store(settings: Settings) -> None:
    config = mlflow_server.ServerConfig.load()
    argv = mlflow_server.command(settings, config)
    assert argv[argv.index("--backend-store-uri") + 1] == settings.mlflow_tracking_uri
    assert argv[argv.index("--artifacts-destination") + 1] == settings.mlflow_artifacts_dir.as_uri()
    assert argv[argv.index("--workers") + 1] == str(config.workers)
    served = settings.with_overrides(mlflow_tracking_uri="http://127.0.0.1:5000")
    with pytest.raises(ValueError, match="needs a database store"):
        mlflow_server.command(served, config)


def test_mlflow_server_config_errors_name_the_key(tmp_path: Path) -> None:
    bad = tmp_path / "server.toml"
    bad.write_text('[server]\nhost = "127.0.0.1"\nport = "5000"\nworkers = 1\nserve_artifacts = true\n')
    with pytest.raises(ValueError, match=r"\[server\] port must be int"):
        mlflow_server.ServerConfig.load(bad)
    bad.write_text('[server]\nhost = "h"\nport = 1\nworkers = 1\nserve_artifacts = true\nthreads = 2\n')
    with pytest.raises(ValueError, match="unknown keys \\['threads'\\]"):
        mlflow_server.ServerConfig.load(bad)


def _free_port_config(**choices: object) -> StackConfig:
    airflow, mlflow, ranker = free_ports("127.0.0.1", 3)
    return StackConfig(airflow_port=airflow, mlflow_port=mlflow, ranker_port=ranker, **choices)  # type: ignore[arg-type]


def test_celery_stack_refuses_sqlite_metadata_and_starts_nothing(settings: Settings) -> None:
    with pytest.raises(StackError, match="Celery executor needs PostgreSQL"):
        up(settings, _free_port_config(executor="celery", postgres_admin_url=None), say=lambda _: None)
    assert not state_path(settings).exists()


def test_celery_stack_refuses_a_broker_that_does_not_answer(settings: Settings) -> None:
    (closed,) = free_ports("127.0.0.1", 1)
    config = _free_port_config(
        executor="celery",
        metadata_url="postgresql+psycopg://postgres@127.0.0.1:5432/unused",
        broker_url=f"redis://127.0.0.1:{closed}/0",
    )
    with pytest.raises(StackError, match=f"broker at redis://127.0.0.1:{closed}/0 does not answer"):
        up(settings, config, say=lambda _: None)
    assert not state_path(settings).exists()


def test_broker_password_comes_from_the_environment_only(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(celery_workers.BROKER_PASSWORD_ENV, raising=False)
    assert celery_workers.broker_url("redis://127.0.0.1:6379/2") == "redis://127.0.0.1:6379/2"
    monkeypatch.setenv(celery_workers.BROKER_PASSWORD_ENV, "s3cret")
    assert celery_workers.broker_url("redis://127.0.0.1:6379/2") == "redis://:s3cret@127.0.0.1:6379/2"
    with pytest.raises(ValueError, match="REDIS_PASSWORD, not in the URL"):
        celery_workers.broker_url("redis://:inline@127.0.0.1:6379/2")
    with pytest.raises(ValueError, match="expected redis://"):
        celery_workers.broker_url("amqp://127.0.0.1:5672//")


def test_each_worker_names_itself_to_the_tasks_it_runs(monkeypatch: pytest.MonkeyPatch) -> None:
    """The name a task instance records as its hostname, so the REST API says which worker ran it."""
    nodes = {spec.name: spec.node("host") for spec in celery_workers.WORKERS}
    assert nodes == {"default": "default@host", "gpu": "gpu@host"}
    assert {spec.name: spec.queues for spec in celery_workers.WORKERS} == {"default": ("default",), "gpu": ("gpu",)}
    monkeypatch.setenv(celery_workers.WORKER_NAME_ENV, nodes["gpu"])
    assert celery_workers.task_hostname() == "gpu@host"
    monkeypatch.delenv(celery_workers.WORKER_NAME_ENV)
    assert celery_workers.task_hostname() == socket.getfqdn()


def test_stack_up_closes_the_runs_the_last_stack_left_running(settings: Settings) -> None:
    """No precompute runs while the stack is down: a record still ``running`` belongs to a run it stopped."""
    start = datetime(2026, 3, 1, 12, tzinfo=UTC)
    with open_configured_store(settings, init=True) as store:
        version = store.register_embedding_version("1", "1", 8, created_at=start)
        for key, hour in (("killed", 0), ("done", 1)):
            begin = start + timedelta(hours=hour)
            store.start_run(key, begin, begin + timedelta(hours=1), "1", "1", "2", version, begin)
        store.finish_run("done", "succeeded", {}, {}, start + timedelta(hours=2))

    assert close_runs_left_running(settings, start + timedelta(hours=3)) == ["killed"]
    with open_configured_store(settings) as store:
        killed, done = store.get_run("killed"), store.get_run("done")
    assert killed is not None and killed.status == "failed" and "solaris stack up" in (killed.reason or "")
    assert done is not None and done.status == "succeeded"
    assert close_runs_left_running(settings, start + timedelta(hours=4)) == []
