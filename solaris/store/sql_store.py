"""What both SQL backends share: versions, reads, runs and stats through the dialect's SQL files.

Statements go to the driver as written in ``sql/<dialect>/`` (``exec_driver_sql``: no SQL compilation); the
serving read skips SQLAlchemy altogether and runs one statement on a long-lived driver connection
(:mod:`solaris.store.readers`). Backends supply how a batch of keys is passed (JSON on SQLite, arrays on PostgreSQL)
and how bulk writes and expiry run.
"""

from __future__ import annotations

import time
from abc import abstractmethod
from collections.abc import Mapping
from datetime import datetime
from typing import Any

import numpy as np
from sqlalchemy import Connection, Engine, inspect

from solaris.embedding_version import embedding_version
from solaris.store import validate
from solaris.store.base import FeatureStore
from solaris.store.codec import MICROS_PER_HOUR, from_micros, to_micros
from solaris.store.cohorts import cohort_requests
from solaris.store.combine import ItemLists, PairIndex, TierRows, assemble
from solaris.store.errors import StoreError, StoreReadTimeout
from solaris.store.item_lists import ItemListCache
from solaris.store.readers import ReaderConnections
from solaris.store.records import EmbeddingVersion, TableStats, TierBatchRead
from solaris.store.sql_runs import SqlRunRecords
from solaris.store.sqlfiles import load_sql
from solaris.store.tables import build_metadata, schema_statements

EXPIRING_TABLES = ("pair_embeddings", "user_aggregates", "user_neighbours", "item_neighbours", "exposure_counts")


def _table_stats(row: tuple) -> TableStats:
    n, fresh, oldest, newest, soon = row
    return TableStats(int(n), int(fresh), from_micros(oldest), from_micros(newest), int(soon))


def version_id(fm_version: str, ae_version: str, dim: int, dtype: str) -> str:
    """The store's id for an embedding version; a malformed part is a :class:`StoreError` naming it."""
    try:
        return embedding_version(fm_version, ae_version, dim, dtype)
    except ValueError as error:
        raise StoreError(str(error)) from error


class SqlFeatureStore(SqlRunRecords, FeatureStore):
    dialect: str

    def __init__(self, engine: Engine) -> None:
        self._engine = engine
        # Reads run in autocommit: each tier is one statement (atomic on its own), and skipping BEGIN and
        # the pool's ROLLBACK saves two round trips per request on PostgreSQL.
        self._reader = engine.execution_options(isolation_level="AUTOCOMMIT")
        # Versions never change once registered, so the serving path looks each one up once.
        self._versions: dict[str, EmbeddingVersion] = {}
        self._readers = ReaderConnections(self._open_reader)
        self._item_lists = ItemListCache()

    @property
    def engine(self) -> Engine:
        return self._engine

    def _sql(self, name: str) -> str:
        return load_sql(self.dialect, name)

    def _open_reader(self) -> Any:
        """A driver connection set up like the engine's (its connect hooks ran) but outside its pool."""
        proxied = self._engine.raw_connection()
        driver = proxied.driver_connection  # detach() unlinks it from the proxy
        proxied.detach()
        return driver

    def _rows(self, conn: Connection, name: str, params: Mapping[str, Any]) -> list[tuple]:
        return [tuple(r) for r in conn.exec_driver_sql(self._sql(name), dict(params)).all()]

    @abstractmethod
    def _pairs_param(self, index: PairIndex) -> dict[str, Any]:
        """Bind parameters carrying the requested (user, item) keys; a backend may send the users and the
        items apart and answer their cross product, of which the reader keeps the requested pairs."""

    @abstractmethod
    def _users_param(self, users: np.ndarray) -> dict[str, Any]: ...

    @abstractmethod
    def _read_tier_rows(self, conn: Any, params: dict[str, Any], timeout_s: float | None) -> TierRows:
        """``read_tiers`` run on a reader connection, its answer as columns (``timeout_s``: local_reads only)."""

    def _read_item_lists(self, conn: Any, version: str) -> list[tuple]:
        """Every list of ``version`` on a reader connection, unbounded by the request's timeout: a load runs
        once per version each time its lists change (bench_store's 4,000 lists: 9-12 ms on SQLite, 18-26 ms on
        PostgreSQL, 46-49 ms cold), and one cut short on every request would never serve the tier."""
        return conn.execute(self._sql("read_item_lists"), {"version": version}).fetchall()

    def init_schema(self) -> None:
        with self._engine.begin() as conn:
            for statement in schema_statements(self._engine.dialect):
                conn.exec_driver_sql(statement)

    def initialised(self) -> bool:
        with self._engine.connect() as conn:  # the default schema: PostgreSQL's search_path names the store's
            present = set(inspect(conn).get_table_names())
        return set(build_metadata(self._engine.dialect.name).tables) <= present

    def close(self) -> None:
        self._readers.close()
        self._engine.dispose()

    # -- versions ---------------------------------------------------------------------------------------

    def register_embedding_version(
        self, fm_version: str, ae_version: str, dim: int, dtype: str = "float16", *, created_at: datetime
    ) -> str:
        vid = version_id(fm_version, ae_version, dim, dtype)
        params = dict(
            version_id=vid,
            fm_version=fm_version,
            ae_version=ae_version,
            dim=int(dim),
            dtype=dtype,
            created_at=to_micros(created_at, "created_at"),
        )
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("register_version"), params)
        return vid

    def get_embedding_version(self, version_id: str) -> EmbeddingVersion:
        if version_id not in self._versions:
            with self._reader.connect() as conn:
                rows = self._rows(conn, "get_version", {"version_id": version_id})
            if not rows:
                raise StoreError(f"unknown embedding version {version_id!r}; register it first")
            vid, fm, ae, dim, dtype, created = rows[0]
            self._versions[version_id] = EmbeddingVersion(vid, fm, ae, int(dim), dtype, from_micros(created))
        return self._versions[version_id]

    # -- reads ------------------------------------------------------------------------------------------

    def _request(self, user_ids: np.ndarray, item_ids: np.ndarray) -> PairIndex:
        users = validate.read_ids(user_ids, "user_ids")
        items = validate.read_ids(item_ids, "item_ids", len(users))
        return PairIndex.build(users, items)

    def read_tiers_batch(
        self,
        version: str,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        t: datetime,
        timeout_s: float | None = None,
        cohorts: np.ndarray | None = None,
    ) -> TierBatchRead:
        if timeout_s is not None and not self.local_reads:
            raise ValueError(f"{self.dialect} reads wait on a network: bound them from another thread, not timeout_s")
        started = time.monotonic()
        ver = self.get_embedding_version(version)
        index = self._request(user_ids, item_ids)
        keys = None if cohorts is None else validate.ids(cohorts, "cohorts", len(index.inverse))
        params = {"version": version, "t": to_micros(t, "t")} | self._pairs_param(index)
        with self._readers.connection() as conn:
            rows = self._read_tier_rows(conn, params, timeout_s)
            listed = self._item_lists.lists_at(
                version, rows.list_generation(), index.items, params["t"], lambda: self._read_item_lists(conn, version)
            )
            read = assemble(index, rows, listed, ver.dim, ver.dtype)
            if keys is None:
                return read
            new, prototypes, items = cohort_requests(read, keys, item_ids)
            if not len(new):
                return read
            cohort_index = self._request(prototypes, items)
            cohort_params = params | self._pairs_param(cohort_index)
            left = None if timeout_s is None else max(timeout_s - (time.monotonic() - started), 0.0)
            try:
                cohort_rows = self._read_tier_rows(conn, cohort_params, left)
            except StoreReadTimeout:
                return read  # the tiers read in time still serve; only the cohort codes are lost
        found = assemble(cohort_index, cohort_rows, ItemLists.empty(), ver.dim, ver.dtype)
        return read.with_cohort(new, found.pair, found.pair_mask)

    def fresh_pairs(self, version: str, user_ids: np.ndarray, item_ids: np.ndarray, t: datetime) -> np.ndarray:
        self.get_embedding_version(version)
        index = self._request(user_ids, item_ids)
        params = {"version": version, "t": to_micros(t, "t")} | self._pairs_param(index)
        with self._readers.connection() as conn:
            rows = conn.execute(self._sql("fresh_pairs"), params).fetchall()
        fresh = np.zeros(len(index.codes), dtype=bool)
        got = np.array(rows, dtype=np.int64).reshape(-1, 2)
        fresh[index.locate(got[:, 0], got[:, 1])[1]] = True
        return fresh[index.inverse]

    def stats(self, version: str, t: datetime) -> dict[str, TableStats]:
        tm = to_micros(t, "t")
        with self._reader.connect() as conn:
            rows = self._rows(conn, "stats", {"version": version, "t": tm, "horizon": tm + MICROS_PER_HOUR})
        found = {row[0]: row[1:] for row in rows}  # a table with no rows has no row here
        return {name: _table_stats(found.get(name, (0, 0, None, None, 0))) for name in EXPIRING_TABLES}

    # -- expiry ---------------------------------------------------------------------------------------

    def _expiry_params(self, t: datetime, batch_size: int) -> dict[str, int]:
        if not isinstance(batch_size, int) or batch_size <= 0:
            raise StoreError(f"batch_size={batch_size!r}: expected a positive integer")
        return {"t": to_micros(t, "t"), "batch_size": batch_size}

    def _expire_tables(self, conn: Connection, params: dict[str, int]) -> dict[str, int]:
        """Expire every table's rows; deleted item lists move every version's list generation (readers reload)."""
        counts = {table: self._expire_in_batches(conn, table, params) for table in EXPIRING_TABLES}
        if counts["item_neighbours"]:
            conn.exec_driver_sql(self._sql("bump_all_item_list_generations"))
            conn.commit()
        return counts

    def _expire_in_batches(self, conn: Connection, table: str, params: dict[str, int]) -> int:
        """Delete a table's expired rows one bounded transaction at a time, so no lock is held for long."""
        total = 0
        while True:
            deleted = conn.exec_driver_sql(self._sql(f"expire_{table}"), params).rowcount
            conn.commit()
            total += deleted
            if deleted < params["batch_size"]:
                return total
