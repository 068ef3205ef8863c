"""A checksum of a feature store's whole state, for tests that compare it before and after a run."""

from __future__ import annotations

import hashlib

import sqlalchemy as sa

from solaris.store import PostgresStoreConfig, parse_store_url
from solaris.store.tables import build_metadata

# When a run record was written is not part of what a rerun must reproduce.
RUN_TIMING_COLUMNS = {"started_at", "finished_at", "timings"}
# Counts writes of item lists, so that readers reload them: a rerun writes them again, so it moves on.
WRITE_COUNTERS = {"item_list_generations"}


def _engine(url: str) -> sa.Engine:
    """A plain engine (no pragmas, no store code), so a checksum never takes a lock the writer needs."""
    config = parse_store_url(url)
    if isinstance(config, PostgresStoreConfig):
        options = {"options": f"-csearch_path={config.schema}"} if config.schema else {}
        return sa.create_engine(config.url, connect_args=options)
    return sa.create_engine(config.url)


def store_checksum(url: str) -> dict[str, tuple[int, str]]:
    """(rows, sha256) per table over every row and column, run timing columns aside."""
    engine = _engine(url)
    metadata = build_metadata(engine.dialect.name)
    found = {}
    try:
        with engine.connect() as conn:
            for table in (t for t in metadata.sorted_tables if t.name not in WRITE_COUNTERS):
                columns = [c for c in table.columns if c.name not in RUN_TIMING_COLUMNS]
                rows = conn.execute(sa.select(*columns).order_by(*table.primary_key.columns)).all()
                digest = hashlib.sha256()
                for row in rows:
                    digest.update(repr(tuple(bytes(v) if isinstance(v, memoryview) else v for v in row)).encode())
                found[table.name] = (len(rows), digest.hexdigest())
    finally:
        engine.dispose()
    return found
