"""The embedded backend: one SQLite file in WAL mode (readers never block the writer, nor it them)."""

from __future__ import annotations

import json
import sqlite3
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from itertools import repeat
from typing import Any

import numpy as np
from sqlalchemy import create_engine, event

from solaris.store import validate
from solaris.store.combine import PairIndex, TierRows
from solaris.store.config import SqliteStoreConfig
from solaris.store.errors import StoreReadTimeout
from solaris.store.sql_store import SqlFeatureStore

# SQLite calls the deadline check every this many VM steps: ~100 checks in a 2 ms read.
PROGRESS_STEPS = 10_000

# Rows bound as Python tuples at a time by a write: a million users' neighbour rows (10M) as one list took
# 3.8 GB in the scale bench; a block of them takes tens of MB and runs as fast.
WRITE_BLOCK_ROWS = 65_536


def _row_blocks(*columns: Any) -> Iterator[list[tuple]]:
    """Rows of parallel columns, a block at a time: a column is an array or list (sliced per block) or one
    value every row shares."""
    n = next(len(c) for c in columns if isinstance(c, np.ndarray | list))
    for start in range(0, n, WRITE_BLOCK_ROWS):
        block = slice(start, start + WRITE_BLOCK_ROWS)
        yield list(
            zip(
                *(
                    c[block].tolist() if isinstance(c, np.ndarray) else c[block] if isinstance(c, list) else repeat(c)
                    for c in columns
                )
            )
        )


def _execute_in_blocks(conn: Any, sql: str, *columns: Any) -> None:
    """One statement over many rows, in the caller's transaction, holding one block of them in Python."""
    for rows in _row_blocks(*columns):
        conn.exec_driver_sql(sql, rows)


@contextmanager
def _deadline(conn: sqlite3.Connection, timeout_s: float | None) -> Iterator[None]:
    """Interrupt what runs on ``conn`` past ``timeout_s`` (StoreReadTimeout); None: no bound."""
    if timeout_s is None:
        yield
        return
    deadline = time.monotonic() + timeout_s
    conn.set_progress_handler(lambda: time.monotonic() > deadline, PROGRESS_STEPS)  # true: interrupt
    try:
        yield
    except sqlite3.OperationalError as exc:
        if time.monotonic() > deadline:
            raise StoreReadTimeout(f"SQLite read interrupted after {timeout_s * 1000:g} ms") from exc
        raise
    finally:
        conn.set_progress_handler(None, 0)


class SqliteFeatureStore(SqlFeatureStore):
    dialect = "sqlite"
    local_reads = True  # a file on this machine: a read is bounded by interrupting it, on any thread

    def __init__(self, config: SqliteStoreConfig) -> None:
        config.path.parent.mkdir(parents=True, exist_ok=True)
        engine = create_engine(config.url)

        @event.listens_for(engine, "connect")
        def _pragmas(dbapi_conn: Any, _record: Any) -> None:
            cur = dbapi_conn.cursor()
            cur.execute("PRAGMA journal_mode=WAL")
            cur.execute("PRAGMA synchronous=NORMAL")
            cur.execute(f"PRAGMA busy_timeout={int(config.busy_timeout_ms)}")
            cur.execute(f"PRAGMA cache_size=-{int(config.cache_mb) * 1024}")
            cur.close()

        super().__init__(engine)

    def init_schema(self) -> None:
        """The DDL, then the columns a store made before them lacks (SQLite has no ADD COLUMN IF NOT EXISTS)."""
        super().init_schema()
        with self._engine.begin() as conn:
            columns = {row[1] for row in conn.exec_driver_sql("PRAGMA table_info(precompute_runs)")}
            added = (
                ("figures", "add_run_figures"),
                ("reason", "add_run_reason"),
                ("selector", "add_run_selector"),
                ("selector_reason", "add_run_selector_reason"),
            )
            for column, adds_it in added:
                if column not in columns:
                    conn.exec_driver_sql(self._sql(adds_it))

    def _pairs_param(self, index: PairIndex) -> dict[str, Any]:
        # Users and items apart, as flat arrays: SQLite reads JSON pairs slowly (->> per element).
        return {"users": json.dumps(index.users.tolist()), "items": json.dumps(index.items.tolist())}

    def _users_param(self, users: np.ndarray) -> dict[str, Any]:
        return {"users": json.dumps(users.tolist())}

    def _read_tier_rows(self, conn: sqlite3.Connection, params: dict[str, Any], timeout_s: float | None) -> TierRows:
        with _deadline(conn, timeout_s):
            return TierRows.from_rows(conn.execute(self._sql("read_tiers"), params).fetchall())

    def _write_pairs(self, batch: validate.PairBatch) -> None:
        s = batch.stamp
        with self._engine.begin() as conn:
            _execute_in_blocks(
                conn,
                self._sql("upsert_pairs"),
                s.version,
                batch.user_ids,
                batch.item_ids,
                batch.vectors,
                batch.scores,
                s.created_at,
                s.expires_at,
                s.run_id,
            )
            self._analyze_if_never(conn, "pair_embeddings")

    def _write_aggregates(self, batch: validate.AggregateBatch) -> None:
        s = batch.stamp
        with self._engine.begin() as conn:
            _execute_in_blocks(
                conn,
                self._sql("upsert_user_aggregates"),
                s.version,
                batch.user_ids,
                batch.vectors,
                batch.pair_counts,
                batch.window_hours,
                s.created_at,
                s.expires_at,
                s.run_id,
            )
            self._analyze_if_never(conn, "user_aggregates")

    def _write_neighbours(self, batch: validate.NeighbourBatch) -> None:
        s = batch.stamp
        with self._engine.begin() as conn:
            old = {"version": s.version} | self._users_param(batch.owners)
            conn.exec_driver_sql(self._sql("delete_user_neighbours"), old)
            _execute_in_blocks(
                conn,
                self._sql("insert_user_neighbours"),
                s.version,
                batch.owner_ids,
                batch.neighbour_ids,
                batch.similarities,
                s.created_at,
                s.expires_at,
                s.run_id,
            )
            self._analyze_if_never(conn, "user_neighbours")

    def _write_item_lists(self, stamp: validate.Stamp, items: np.ndarray, lists: list[bytes]) -> None:
        with self._engine.begin() as conn:
            _execute_in_blocks(
                conn,
                self._sql("upsert_item_neighbours"),
                stamp.version,
                items,
                lists,
                stamp.created_at,
                stamp.expires_at,
                stamp.run_id,
            )
            conn.exec_driver_sql(self._sql("bump_item_list_generation"), {"version": stamp.version})
            self._analyze_if_never(conn, "item_neighbours")

    def _write_exposure(self, batch: validate.ExposureBatch) -> None:
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("upsert_exposure_counts"), batch.rows())
            self._analyze_if_never(conn, "exposure_counts")

    def _analyze_if_never(self, conn: Any, table: str) -> None:
        """ANALYZE a table SQLite holds no statistics for, in the writing transaction. SQLite never analyzes
        by itself, and without statistics the serving read's p99 at 1M rows was 3-4x that with them
        (bench_store: 5.4 vs 1.4-2.1 ms). Analyzed once, the shape they record (few versions, many users,
        one row per pair) stays right as the table grows."""
        has_stats = conn.exec_driver_sql(self._sql("stats_table")).scalar_one()
        if not has_stats or conn.exec_driver_sql(self._sql("never_analyzed"), {"table": table}).scalar_one():
            conn.exec_driver_sql(self._sql("analyze_table").format(table=table))

    def expire(self, t: datetime, batch_size: int = 10_000) -> dict[str, int]:
        params = self._expiry_params(t, batch_size)
        with self._engine.connect() as conn:
            counts = self._expire_tables(conn, params)
        return counts | {"pair_partitions_dropped": 0}
