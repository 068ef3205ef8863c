"""Choosing the backend by URL, by config, or by Airflow connection id."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import quote

import numpy as np
import pytest
from store_helpers import HOUR, T0, vecs

from solaris.store import (
    FeatureStore,
    PostgresStoreConfig,
    SqliteStoreConfig,
    open_store,
    parse_store_url,
    store_from_airflow_connection,
    url_from_connection,
)


def test_urls_choose_the_backend() -> None:
    assert parse_store_url("sqlite:////tmp/x/store.db") == SqliteStoreConfig(Path("/tmp/x/store.db"))
    pg = parse_store_url("postgresql://u:p@db:5433/fs?schema=serving")
    assert pg == PostgresStoreConfig("postgresql+psycopg://u:p@db:5433/fs", schema="serving")


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("sqlite://", "needs a file path"),
        ("sqlite:///:memory:", "needs a file path"),
        ("mysql://u@h/db", "expected sqlite"),
        ("not a url", "not a database URL"),
        ("postgresql://u@h/db?schema=a;drop", "letters, digits and underscores"),
    ],
)
def test_bad_urls_are_refused(url: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_store_url(url)


def test_sqlite_store_runs_in_wal_mode(tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path}/sub/store.db", init=True) as store:
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            assert conn.exec_driver_sql("PRAGMA journal_mode").scalar_one() == "wal"


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_postgresql_store_connections_run_in_its_schema_without_jit(store: FeatureStore) -> None:
    """Once partitions have statistics, JIT compiled ~0.4 s of code for every pair write."""
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        schema = conn.exec_driver_sql("SELECT current_schema()").scalar_one()
        assert schema.startswith("t_") and conn.exec_driver_sql("SHOW jit").scalar_one() == "off"
    with store._readers.connection() as reader:  # type: ignore[attr-defined]
        assert reader.execute("SELECT current_schema(), current_setting('jit')").fetchone() == (schema, "off")


def test_airflow_connection_resolves_to_a_working_store(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from airflow.sdk import Connection

    monkeypatch.setenv("AIRFLOW_HOME", str(tmp_path / "airflow"))
    # Airflow's sqlite convention: the host is the file path (URL-encoded in the URI form).
    monkeypatch.setenv("AIRFLOW_CONN_SOLARIS_STORE", "sqlite://" + quote(f"{tmp_path}/af.db", safe=""))
    with store_from_airflow_connection("solaris_store", init=True) as store:
        v = store.register_embedding_version("1", "1", 8, created_at=T0)
        store.write_pair_embeddings("r", v, np.array([1]), np.array([2]), vecs(1), np.ones(1), T0, T0 + HOUR)
        assert store.read_tiers(v, 1, np.array([2]), T0).pair_mask.tolist() == [True]
    assert (tmp_path / "af.db").is_file()

    pg = Connection(conn_id="pg", uri="postgres://postgres@127.0.0.1:5432/solaris")
    assert url_from_connection(pg) == "postgresql+psycopg://postgres@127.0.0.1:5432/solaris"
    typed = Connection(
        conn_id="x",
        conn_type="postgres",
        host="db",
        login="u",
        password="p@ss",
        port=5433,
        schema="fs",
        extra='{"schema": "serving"}',
    )
    assert parse_store_url(url_from_connection(typed)) == PostgresStoreConfig(
        "postgresql+psycopg://u:p%40ss@db:5433/fs", schema="serving"
    )
    with pytest.raises(ValueError, match="type 'http'"):
        url_from_connection(Connection(conn_id="h", conn_type="http", host="x"))
