"""A run record keeps the quality figures its coverage step measured, on both backends, and a store made
before the record had them gains the column when it is opened."""

from __future__ import annotations

import math
import sqlite3
from pathlib import Path

import pytest
from store_helpers import HOUR, T0

from solaris.store import FeatureStore, SqliteStoreConfig, StoreError, open_store


def test_figures_are_kept_replaced_and_survive_a_retry(store: FeatureStore, version: str) -> None:
    store.start_run("run-1", T0, T0 + HOUR, "3", "2", "5", version, T0)
    assert store.get_run("run-1").figures == {}  # type: ignore[union-attr]

    store.record_run_figures("run-1", {"hit_rate_ttl": 0.25, "ttl_pairs": 8})
    store.finish_run("run-1", "succeeded", {"pairs": 10}, {"embed": 1.5}, T0 + 2 * HOUR)

    run = store.get_run("run-1")
    assert run is not None and run.figures == {"hit_rate_ttl": 0.25, "ttl_pairs": 8.0}
    assert run.counts == {"pairs": 10} and [r.figures for r in store.recent_runs(1)] == [run.figures]
    store.record_run_figures("run-1", {"requested_auc": 0.75})
    assert store.get_run("run-1").figures == {"requested_auc": 0.75}  # type: ignore[union-attr]
    store.start_run("run-1", T0, T0 + HOUR, "3", "2", "5", version, T0 + 3 * HOUR)
    retried = store.get_run("run-1")
    assert retried is not None and (retried.status, retried.counts) == ("running", {})
    assert retried.figures == {"requested_auc": 0.75}  # measured before the first attempt wrote


@pytest.mark.parametrize(
    ("run_id", "figures", "message"),
    [("ghost", {"x": 1.0}, "never started"), ("run-0", {"a": math.nan, "b": math.inf}, "figures a, b are not finite")],
)
def test_recording_figures_refuses_bad_input(
    store: FeatureStore, version: str, run_id: str, figures: dict[str, float], message: str
) -> None:
    store.start_run("run-0", T0, T0 + HOUR, "3", "2", "5", version, T0)
    with pytest.raises(StoreError, match=message):
        store.record_run_figures(run_id, figures)
    assert store.get_run("run-0").figures == {}  # type: ignore[union-attr]


OLD_RUNS = """CREATE TABLE precompute_runs (
    run_id TEXT NOT NULL PRIMARY KEY, interval_start BIGINT NOT NULL, interval_end BIGINT NOT NULL,
    fm_version TEXT NOT NULL, ae_version TEXT NOT NULL, vm_version TEXT NOT NULL, embedding_version TEXT NOT NULL,
    status TEXT NOT NULL, counts TEXT NOT NULL, timings TEXT NOT NULL, started_at BIGINT NOT NULL, finished_at BIGINT
)"""


def test_a_sqlite_store_made_before_figures_and_reasons_gains_the_columns(tmp_path: Path) -> None:
    path = tmp_path / "old.db"
    with sqlite3.connect(path) as conn:
        conn.execute(OLD_RUNS)
        conn.execute(
            "INSERT INTO precompute_runs VALUES ('old', 0, 3600000000, '3', '2', '5', 'v', 'succeeded', "
            "'{\"pairs\": 1}', '{}', 0, 1)"
        )
    for _ in range(2):  # opening it again finds the column there
        with open_store(SqliteStoreConfig(path), init=True) as store:
            old = store.get_run("old")
            assert old is not None and old.counts == {"pairs": 1} and old.figures == {} and old.reason is None


@pytest.mark.postgres
def test_a_postgresql_store_made_before_figures_and_reasons_gains_the_columns(pg_url: str) -> None:
    import uuid

    import sqlalchemy as sa

    from solaris.store import PostgresStoreConfig

    schema = f"old_{uuid.uuid4().hex[:10]}"
    engine = sa.create_engine(pg_url)
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'CREATE SCHEMA "{schema}"')
            conn.exec_driver_sql(OLD_RUNS.replace("precompute_runs", f'"{schema}".precompute_runs'))
            conn.exec_driver_sql(
                f"INSERT INTO \"{schema}\".precompute_runs VALUES ('old', 0, 3600000000, '3', '2', "
                "'5', 'v', 'succeeded', '{}', '{}', 0, 1)"
            )
        for _ in range(2):
            with open_store(PostgresStoreConfig(pg_url, schema=schema), init=True) as store:
                old = store.get_run("old")
                assert old is not None and old.figures == {} and old.reason is None
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()
