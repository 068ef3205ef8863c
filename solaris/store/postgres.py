"""The production backend: PostgreSQL, bulk writes by binary COPY, pairs partitioned by expiry hour.

Writes COPY a batch into a temporary staging table, then move it with one INSERT ... SELECT, all in one
transaction, so readers see the whole batch or none of it. Expiry drops partitions whose hour has wholly
passed, so its cost does not grow with the table. Serving reads run on reader sessions that pin one plan,
hash joins over one bitmap scan per partition, whatever the planner statistics (``read_session.sql``).
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, create_engine, event

from solaris.store import validate
from solaris.store.codec import MICROS_PER_HOUR
from solaris.store.combine import PairIndex, TierRows
from solaris.store.config import PostgresStoreConfig
from solaris.store.errors import StoreError
from solaris.store.pgarrays import register_int8_arrays, register_numpy_array_loaders
from solaris.store.pgcopy import binary_copy_payload
from solaris.store.sql_store import SqlFeatureStore
from solaris.store.sqlfiles import statements

PARTITION_PREFIX = "pair_embeddings_h"


class PostgresFeatureStore(SqlFeatureStore):
    dialect = "postgresql"

    def __init__(self, config: PostgresStoreConfig) -> None:
        # JIT off: every statement here is short, and once the partitions have statistics their cost
        # estimates pass jit_above_cost, so each pair write compiled ~0.4 s of LLVM code (measured: writes
        # 2x slower once autovacuum had analyzed the partitions).
        options = ["-cjit=off"] + ([f"-csearch_path={config.schema}"] if config.schema else [])
        engine = create_engine(config.url, pool_size=config.pool_size, connect_args={"options": " ".join(options)})
        event.listen(engine, "connect", lambda dbapi_conn, _record: register_int8_arrays(dbapi_conn))
        self._schema = config.schema
        super().__init__(engine)

    def init_schema(self) -> None:
        if self._schema:
            with self._engine.begin() as conn:
                conn.exec_driver_sql(f'CREATE SCHEMA IF NOT EXISTS "{self._schema}"')
        super().init_schema()

    def _open_reader(self) -> Any:
        conn = super()._open_reader()
        conn.autocommit = True  # a read is one statement: no BEGIN / ROLLBACK round trips
        conn.prepare_threshold = 0  # prepared on first use: the session's generic plan serves every read
        register_numpy_array_loaders(conn)
        for statement in statements(self.dialect, "read_session"):
            conn.execute(statement)
        return conn

    def _pairs_param(self, index: PairIndex) -> dict[str, Any]:
        return {"users": index.users, "items": index.items}  # bigint[] by Int8ArrayDumper

    def _users_param(self, users: np.ndarray) -> dict[str, Any]:
        return {"users": users}

    def _read_tier_rows(self, conn: Any, params: dict[str, Any], timeout_s: None) -> TierRows:
        # One row of columns, in binary: the arrays load straight into numpy (register_numpy_array_loaders).
        return TierRows(*conn.execute(self._sql("read_tiers"), params, binary=True).fetchone())

    def _copy(self, conn: Connection, name: str, columns: list[tuple[str, np.ndarray]]) -> None:
        with conn.connection.driver_connection.cursor() as cur, cur.copy(self._sql(name)) as copy:
            copy.write(binary_copy_payload(columns))

    @contextmanager
    def _pair_lock(self) -> Iterator[Connection]:
        """A connection holding the pair-writer lock (session-level: it spans several transactions)."""
        with self._engine.connect() as conn:
            conn.exec_driver_sql(self._sql("lock_pair_writes"))
            conn.commit()
            try:
                yield conn
            finally:
                conn.rollback()
                conn.exec_driver_sql(self._sql("unlock_pair_writes"))
                conn.commit()

    def _ensure_partition(self, conn: Connection, expires_at: int) -> None:
        hour = expires_at // MICROS_PER_HOUR
        if hour < 0:
            raise StoreError(f"expires_at {expires_at} us is before 1970; the pair table has no partition for it")
        ddl = self._sql("create_pair_partition").format(
            hour=hour, lower=hour * MICROS_PER_HOUR, upper=(hour + 1) * MICROS_PER_HOUR
        )
        conn.exec_driver_sql(ddl)
        conn.commit()

    def _write_pairs(self, batch: validate.PairBatch) -> None:
        s = batch.stamp
        partition = f"{PARTITION_PREFIX}{s.expires_at // MICROS_PER_HOUR}"
        with self._pair_lock() as conn:
            self._ensure_partition(conn, s.expires_at)
            absent = self._sql("version_absent").format(table=partition)
            new_version = conn.exec_driver_sql(absent, {"version": s.version}).scalar_one()
            conn.exec_driver_sql(self._sql("create_pair_staging"))
            self._copy(
                conn,
                "copy_pair_staging",
                [
                    ("int8", batch.user_ids),
                    ("int8", batch.item_ids),
                    ("bytea", batch.vectors),
                    ("float4", batch.scores),
                ],
            )
            params = {"version": s.version, "created_at": s.created_at, "expires_at": s.expires_at, "run_id": s.run_id}
            conn.exec_driver_sql(self._sql("delete_pair_keys"), params)
            conn.exec_driver_sql(self._sql("insert_pairs"), params)
            conn.commit()
            # Under the pair lock: expiry cannot drop the partition in between.
            self._analyze_if_stale(conn, partition, new_version)

    def _write_aggregates(self, batch: validate.AggregateBatch) -> None:
        s = batch.stamp
        params = {
            "version": s.version,
            "window_hours": batch.window_hours,
            "created_at": s.created_at,
            "expires_at": s.expires_at,
            "run_id": s.run_id,
        }
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("create_aggregate_staging"))
            self._copy(
                conn,
                "copy_aggregate_staging",
                [
                    ("int8", batch.user_ids),
                    ("bytea", batch.vectors),
                    ("int8", batch.pair_counts),
                ],
            )
            conn.exec_driver_sql(self._sql("upsert_user_aggregates"), params)
        with self._engine.connect() as conn:
            self._analyze_if_stale(conn, "user_aggregates")

    def _write_neighbours(self, batch: validate.NeighbourBatch) -> None:
        s = batch.stamp
        params = {"version": s.version, "created_at": s.created_at, "expires_at": s.expires_at, "run_id": s.run_id}
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("lock_neighbour_writes"))
            conn.exec_driver_sql(self._sql("create_neighbour_staging"))
            self._copy(
                conn,
                "copy_neighbour_staging",
                [
                    ("int8", batch.owner_ids),
                    ("int8", batch.neighbour_ids),
                    ("float4", batch.similarities),
                ],
            )
            conn.exec_driver_sql(
                self._sql("delete_user_neighbours"), {"version": s.version} | self._users_param(batch.owners)
            )
            conn.exec_driver_sql(self._sql("insert_user_neighbours"), params)
        with self._engine.connect() as conn:
            self._analyze_if_stale(conn, "user_neighbours")

    def _write_item_lists(self, stamp: validate.Stamp, items: np.ndarray, lists: list[bytes]) -> None:
        rows = [
            (stamp.version, item, packed, stamp.created_at, stamp.expires_at, stamp.run_id)
            for item, packed in zip(items.tolist(), lists, strict=True)
        ]
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("upsert_item_neighbours"), rows)
            conn.exec_driver_sql(self._sql("bump_item_list_generation"), {"version": stamp.version})
        with self._engine.connect() as conn:
            self._analyze_if_stale(conn, "item_neighbours")

    def _write_exposure(self, batch: validate.ExposureBatch) -> None:
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("upsert_exposure_counts"), batch.rows())
        with self._engine.connect() as conn:
            self._analyze_if_stale(conn, "exposure_counts")

    def _analyze_if_stale(self, conn: Connection, table: str, new_version: bool = False) -> None:
        """ANALYZE a table PostgreSQL has never analyzed (a new expiry-hour partition, a new store's tables),
        or a pair partition the write brought a version its statistics do not know.

        Without statistics the planner takes ``version_id = $1`` for a selective key and reads every row of
        the version to find a few users (measured: all 5,000 neighbour rows of 500 users, for one user's 10),
        until autovacuum analyzes the table a minute or more after the write. A version missing from them
        (a shadow version, written into each hour's partition after the champion's) is taken for one row,
        and the next rerun's key delete joined 50k rows by 50k (minutes, measured). Analyzed once per version,
        a table's statistics (few versions, many users) stay right, and autovacuum keeps them current.
        """
        if new_version or conn.exec_driver_sql(self._sql("never_analyzed"), {"table": table}).scalar_one():
            conn.exec_driver_sql(self._sql("analyze_table").format(table=table))
        conn.commit()

    def _drop_expired_partitions(self, t: int) -> int:
        """Drop partitions whose every row has expired (range upper bound - 1 <= t); returns how many."""
        dropped = 0
        with self._pair_lock() as conn:
            names = [r[0] for r in self._rows(conn, "list_pair_partitions", {})]
            conn.commit()
            for name in names:
                hour = int(name.removeprefix(PARTITION_PREFIX))
                if (hour + 1) * MICROS_PER_HOUR - 1 <= t:
                    conn.exec_driver_sql(self._sql("drop_pair_partition").format(hour=hour))
                    conn.commit()
                    dropped += 1
        return dropped

    def expire(self, t: datetime, batch_size: int = 10_000) -> dict[str, int]:
        params = self._expiry_params(t, batch_size)
        dropped = self._drop_expired_partitions(params["t"])
        with self._engine.connect() as conn:
            counts = self._expire_tables(conn, params)
        return counts | {"pair_partitions_dropped": dropped}
