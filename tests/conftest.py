"""Shared fixtures: an isolated SOLARIS_HOME per test, a PostgreSQL database per test session, a fresh store per
call on either backend, and one model set trained on the tiny world per session.

PostgreSQL tests are marked ``postgres``. Outside CI they skip when the server is unreachable; under
``CI=true`` they fail instead, so a CI run can never pass without having exercised PostgreSQL.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest
import sqlalchemy as sa
from airflow_home import point_at_own_airflow, remove_own_airflow

from solaris.config import Settings
from solaris.store import FeatureStore, PostgresStoreConfig, SqliteStoreConfig, open_store

if TYPE_CHECKING:
    from solaris.training.jobs import TrainReport, World

PG_ADMIN_URL = os.environ.get("SOLARIS_TEST_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


def pytest_configure(config: pytest.Config) -> None:
    point_at_own_airflow(config)


def pytest_unconfigure(config: pytest.Config) -> None:
    remove_own_airflow(config)


@pytest.fixture
def settings(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Settings:
    for key in [k for k in os.environ if k.startswith("SOLARIS_") and k != "SOLARIS_TEST_PG_URL"]:
        monkeypatch.delenv(key)
    monkeypatch.setenv("SOLARIS_HOME", str(tmp_path))
    return Settings.from_env()


def _psycopg_dsn(url: str) -> str:
    return url.replace("postgresql+psycopg://", "postgresql://", 1)


@pytest.fixture(scope="session")
def pg_url() -> Iterator[str]:
    """A fresh database for this test session, dropped afterwards."""
    import psycopg

    try:
        admin = psycopg.connect(_psycopg_dsn(PG_ADMIN_URL), autocommit=True, connect_timeout=5)
    except psycopg.OperationalError as exc:
        message = f"PostgreSQL unreachable at {PG_ADMIN_URL}: {exc}"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    name = f"solaris_test_{uuid.uuid4().hex[:12]}"
    with admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            yield PG_ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.fixture(scope="session")
def s3_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """A bucket on an S3-compatible server on localhost (moto's), as a staging URL any process can open."""
    import sys
    import urllib.parse

    import pyarrow.fs
    from local_service import serving

    from solaris.ops.health import free_ports

    port = free_ports("127.0.0.1", 1)[0]
    argv = [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)]
    with serving("moto's S3 server", argv, f"http://127.0.0.1:{port}/", tmp_path_factory.mktemp("moto") / "log"):
        os.environ.setdefault("AWS_ACCESS_KEY_ID", "solaris-test")  # moto accepts any keys; pyarrow needs some
        os.environ.setdefault("AWS_SECRET_ACCESS_KEY", "solaris-test")
        endpoint = {"endpoint_override": f"127.0.0.1:{port}", "scheme": "http", "region": "us-east-1"}
        # The bucket, which production creates once, outside SOLARIS.
        pyarrow.fs.S3FileSystem(**endpoint, allow_bucket_creation=True).create_dir("staging")
        yield "s3://staging/runs?" + urllib.parse.urlencode(endpoint, safe=":")


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Callable[..., FeatureStore]]:
    """Opens a new, empty, initialised store per call (the property test needs one per example), or with
    ``same_as`` another handle on that store's database (what a second process, a ranker, opens)."""
    opened: list[FeatureStore] = []
    configs: dict[int, SqliteStoreConfig | PostgresStoreConfig] = {}
    schemas: list[str] = []
    pg_url = request.getfixturevalue("pg_url") if backend == "postgres" else None

    def make(same_as: FeatureStore | None = None) -> FeatureStore:
        if same_as is not None:
            config = configs[id(same_as)]
        elif pg_url is None:
            config = SqliteStoreConfig(tmp_path / f"store_{uuid.uuid4().hex[:8]}.db")
        else:
            schemas.append(f"t_{uuid.uuid4().hex[:12]}")
            config = PostgresStoreConfig(pg_url, schema=schemas[-1], pool_size=12)
        opened.append(open_store(config, init=True))
        configs[id(opened[-1])] = config
        return opened[-1]

    yield make
    for store in opened:
        store.close()
    if schemas:
        engine = sa.create_engine(pg_url)
        with engine.begin() as conn:
            for schema in schemas:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


@pytest.fixture(scope="session")
def trained(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, World, TrainReport]:
    """``train_all`` on the tiny world, registered in its own MLflow store; FM, AE and VM are @champion, and
    so is a demand model trained on the world's last day (the budget selector, the default, needs one).

        Tests that move aliases must put them back: the tracking, precompute and DAG tests all share it.
    """
    from solaris.data.eventlog import EventLog
    from solaris.data.synthetic import PRESETS, generate_world
    from solaris.models.training import FitConfig
    from solaris.precompute.params import PrecomputeParams
    from solaris.tracking import registry
    from solaris.training.demand import train_demand_job
    from solaris.training.demand_fit import DemandPlan
    from solaris.training.jobs import TrainPlan, World, train_all

    home = tmp_path_factory.mktemp("solaris")
    settings = Settings.from_env({"SOLARIS_HOME": str(home)})
    generate_world(PRESETS["tiny"].with_seed(0), settings.world_dir("tiny"), overwrite=True, progress=False)
    plan = TrainPlan(fit=FitConfig(progress=False, threads=1))
    report = train_all(settings, settings.world_dir("tiny"), plan)
    log = EventLog(settings.world_dir("tiny"))
    demand_plan = DemandPlan(train_hours=12, valid_hours=2)
    train_demand_job(registry.connect(settings), settings, log, log.end, PrecomputeParams.ttl_hours, demand_plan)
    return settings, World.open(settings.world_dir("tiny"), plan.fractions), report


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    for item in items:
        if "pg_url" in getattr(item, "fixturenames", ()):
            item.add_marker(pytest.mark.postgres)


def pytest_terminal_summary(terminalreporter, exitstatus, config) -> None:  # noqa: ANN001
    """Make the PostgreSQL test count visible in every run's output."""
    counts = {"passed": 0, "failed": 0, "skipped": 0}
    for outcome in counts:
        for report in terminalreporter.stats.get(outcome, []):
            if report.when in ("call", "setup") and "postgres" in report.keywords:
                if outcome != "passed" or report.when == "call":
                    counts[outcome] += 1
    terminalreporter.write_line("postgres tests: {passed} passed, {failed} failed, {skipped} skipped".format(**counts))
