"""The serving read's own driver connections (reuse, a failed read, closing) and numpy id arrays on PostgreSQL."""

from __future__ import annotations

import numpy as np
import psycopg
import pytest
from store_helpers import HOUR, T0, vecs

from solaris.store import FeatureStore
from solaris.store.codec import to_micros
from solaris.store.pgarrays import register_int8_arrays, register_numpy_array_loaders
from solaris.store.readers import ReaderConnections
from solaris.store.records import ExposureCounts
from solaris.store.sqlfiles import load_sql


class FakeConnection:
    def __init__(self) -> None:
        self.closed = False

    def close(self) -> None:
        self.closed = True


def readers() -> tuple[ReaderConnections, list[FakeConnection]]:
    opened: list[FakeConnection] = []

    def connect() -> FakeConnection:
        opened.append(FakeConnection())
        return opened[-1]

    return ReaderConnections(connect), opened


def test_reads_in_turn_share_one_connection_and_concurrent_reads_do_not() -> None:
    pool, opened = readers()
    with pool.connection() as first:
        pass
    with pool.connection() as again, pool.connection() as concurrent:
        assert again is first and concurrent is not first
    assert len(opened) == 2 and not any(c.closed for c in opened)


def test_a_failed_read_closes_its_connection_and_the_next_read_gets_a_new_one() -> None:
    pool, _ = readers()
    with pytest.raises(RuntimeError, match="socket"), pool.connection() as broken:
        raise RuntimeError("socket closed")
    assert broken.closed
    with pool.connection() as fresh:
        assert fresh is not broken and not fresh.closed


def test_close_closes_idle_connections_now_and_one_in_flight_when_its_read_ends() -> None:
    pool, _ = readers()
    with pool.connection() as in_flight:
        with pool.connection() as idle:
            pass
        pool.close()
        assert idle.closed and not in_flight.closed
    assert in_flight.closed


@pytest.mark.postgres
@pytest.mark.parametrize(
    "ids",
    [np.array([5, 2**40, 0]), np.arange(300, dtype=np.int32), np.array([], dtype=np.int64)],
    ids=["mixed", "int32", "empty"],
)
def test_numpy_arrays_reach_postgresql_as_bigint_arrays(pg_url: str, ids: np.ndarray) -> None:
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        register_int8_arrays(conn)
        assert conn.execute("SELECT %(ids)s::bigint[]", {"ids": ids}).fetchone() == (ids.tolist(),)
        assert conn.execute("SELECT count(*) FROM unnest(%(ids)s::bigint[])", {"ids": ids}).fetchone() == (len(ids),)
        with pytest.raises(TypeError, match="1-D integer array, got shape \\(2,\\) dtype float64"):
            conn.execute("SELECT %(ids)s::bigint[]", {"ids": np.array([1.5, 2.0])})


@pytest.mark.postgres
@pytest.mark.parametrize(
    "sql_type, values",
    [
        ("smallint", [1, -2]),
        ("integer", [2**31 - 1, 0]),
        ("bigint", [2**40, -5]),
        ("real", [0.5, -1.25]),
        ("double precision", [1e300, 2.5]),
    ],
)
def test_postgresql_number_arrays_load_in_binary_as_numpy(pg_url: str, sql_type: str, values: list) -> None:
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1)) as conn:
        register_numpy_array_loaders(conn)
        got = conn.execute(f"SELECT %s::{sql_type}[]", [values], binary=True).fetchone()[0]
        assert isinstance(got, np.ndarray) and got.dtype.isnative and got.tolist() == values
        assert conn.execute(f"SELECT '{{}}'::{sql_type}[]", binary=True).fetchone()[0].shape == (0,)
        with pytest.raises(ValueError, match="one-dimensional array without NULLs"):
            conn.execute(f"SELECT ARRAY[1, NULL]::{sql_type}[]", binary=True).fetchone()
        with pytest.raises(ValueError, match="got 2 dimensions"):
            conn.execute(f"SELECT ARRAY[[1], [2]]::{sql_type}[]", binary=True).fetchone()


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_reads_recover_after_the_server_drops_the_reader_connection(store: FeatureStore, version: str) -> None:
    store.write_pair_embeddings("r", version, np.array([1]), np.array([10]), vecs(1), np.ones(1), T0, T0 + HOUR)
    assert store.read_tiers(version, 1, np.array([10]), T0).pair_mask.tolist() == [True]
    with store._readers.connection() as reader:  # type: ignore[attr-defined]
        pid = reader.info.backend_pid
    with store.engine.connect() as admin:  # type: ignore[attr-defined]
        killed = admin.exec_driver_sql(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            f" WHERE pid = {pid} AND application_name = 'solaris-store-reader'"
        ).all()
    assert killed == [(True,)]
    with pytest.raises(psycopg.OperationalError):
        store.read_tiers(version, 1, np.array([10]), T0)
    assert store.read_tiers(version, 1, np.array([10]), T0).pair_mask.tolist() == [True]


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_serving_reads_join_by_hash_as_written_and_after_a_full_analyze(store: FeatureStore, version: str) -> None:
    """The planner's own choice, once partitions are analyzed, probed the pair index per item (10-50x slower);
    the reader session pins hash joins, whatever the statistics."""
    users = np.repeat(np.arange(40), 25)
    for hour in (1, 2):
        store.write_pair_embeddings(
            "r",
            version,
            users,
            np.tile(np.arange(25), 40) + 100 * hour,
            vecs(len(users)),
            np.ones(len(users)),
            T0,
            T0 + hour * HOUR,
        )
    neighbours = (np.arange(40)[:, None] + np.arange(1, 6)) % 40
    store.write_user_neighbours("r", version, np.arange(40), neighbours, np.full(neighbours.shape, 0.5), T0, T0 + HOUR)
    params = {"version": version, "t": to_micros(T0, "t"), "users": np.array([3]), "items": np.arange(100, 300)}
    for analyzed in (False, True):
        if analyzed:
            with store.engine.begin() as conn:  # type: ignore[attr-defined]
                conn.exec_driver_sql("ANALYZE")
        with store._readers.connection() as conn:  # type: ignore[attr-defined]
            for name in ("read_tiers", "fresh_pairs"):
                plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + load_sql("postgresql", name), params))
                assert "Hash Join" in plan or "Hash Semi Join" in plan, plan
                assert "Nested Loop" not in plan and "Memoize" not in plan, plan
    got = store.read_tiers(version, 3, np.array([103, 104, 203, 999]), T0)
    assert got.pair_mask.tolist() == [True, True, True, False] and got.knn_mask.tolist() == [True, True, True, False]


def shown_once(n: int) -> ExposureCounts:
    """Users 0..n-1, each shown its own item once."""
    users, ones = np.arange(n), np.ones((n, 3), int)
    return ExposureCounts(users, ones, users, users, ones)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_writes_leave_statistics_on_tables_postgresql_never_analyzed(store: FeatureStore, version: str) -> None:
    """Without statistics the planner reads every row of a version to find one user's neighbours."""

    def never_analyzed() -> list[str]:
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            return sorted(
                conn.exec_driver_sql(
                    "SELECT relname FROM pg_class WHERE relnamespace = current_schema()::regnamespace"
                    " AND relkind = 'r' AND reltuples < 0"
                ).scalars()
            )

    assert {"user_neighbours", "item_neighbours"} <= set(never_analyzed())
    for hour in (1, 2):
        store.write_pair_embeddings("r", version, np.arange(5), np.arange(5), vecs(5), np.ones(5), T0, T0 + hour * HOUR)
    store.write_user_aggregates("r", version, np.arange(5), vecs(5), np.ones(5, dtype=int), 24, T0, T0 + HOUR)
    store.write_user_neighbours("r", version, np.arange(5), np.full((5, 1), 9), np.ones((5, 1)), T0, T0 + HOUR)
    store.write_item_neighbours("r", version, np.arange(5), np.full((5, 1), 9), np.ones((5, 1)), T0, T0 + HOUR)
    store.write_exposure_counts("r", shown_once(5), T0, T0 + HOUR)
    # what is left is read by primary key alone (one row per version or run), whatever the statistics
    assert never_analyzed() == ["embedding_versions", "item_list_generations", "precompute_runs"]


@pytest.mark.parametrize("backend", ["sqlite"])
def test_writes_leave_statistics_on_tables_sqlite_never_analyzed(store: FeatureStore, version: str) -> None:
    """SQLite never analyzes by itself; without statistics the serving read's tail is several times longer."""

    def analyzed() -> list[str]:
        with store.engine.connect() as conn:  # type: ignore[attr-defined]
            if not conn.exec_driver_sql("SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'").scalar_one():
                return []
            return sorted(set(conn.exec_driver_sql("SELECT tbl FROM sqlite_stat1").scalars()))

    assert analyzed() == []
    store.write_pair_embeddings("r", version, np.arange(5), np.arange(5), vecs(5), np.ones(5), T0, T0 + HOUR)
    store.write_user_aggregates("r", version, np.arange(5), vecs(5), np.ones(5, dtype=int), 24, T0, T0 + HOUR)
    store.write_user_neighbours("r", version, np.arange(5), np.full((5, 1), 9), np.ones((5, 1)), T0, T0 + HOUR)
    store.write_item_neighbours("r", version, np.arange(5), np.full((5, 1), 9), np.ones((5, 1)), T0, T0 + HOUR)
    store.write_exposure_counts("r", shown_once(5), T0, T0 + HOUR)
    assert analyzed() == ["exposure_counts", "item_neighbours", "pair_embeddings", "user_aggregates", "user_neighbours"]
    got = store.read_tiers(version, 0, np.array([0, 1]), T0)
    assert got.pair_mask.tolist() == [True, False]
