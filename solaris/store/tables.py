"""The store's tables as SQLAlchemy Core metadata, mirroring ``sql/<dialect>/schema.sql``.

The DDL files are what the store runs; this mirror is for tools that want typed table objects (the UI
plugin, ad-hoc queries). ``tests/store/test_store_schema.py`` builds both in fresh databases and compares them,
so neither can drift. The dialect differences: on PostgreSQL the pair table is partitioned by expiry hour,
so its primary key must include ``expires_at``.
"""

from __future__ import annotations

from sqlalchemy import REAL, BigInteger, Column, Index, Integer, LargeBinary, MetaData, Table, Text

from solaris.store.sqlfiles import DIALECTS


def _times() -> list[Column]:
    return [Column("created_at", BigInteger, nullable=False), Column("expires_at", BigInteger, nullable=False)]


def build_metadata(dialect: str) -> MetaData:
    if dialect not in DIALECTS:
        raise ValueError(f"no schema for dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    partitioned = dialect == "postgresql"
    md = MetaData()
    Table(
        "embedding_versions",
        md,
        Column("version_id", Text, primary_key=True),
        Column("fm_version", Text, nullable=False),
        Column("ae_version", Text, nullable=False),
        Column("dim", Integer, nullable=False),
        Column("dtype", Text, nullable=False),
        Column("created_at", BigInteger, nullable=False),
    )
    pairs = Table(
        "pair_embeddings",
        md,
        Column("version_id", Text, primary_key=True),
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("item_id", BigInteger, primary_key=True, autoincrement=False),
        Column("vector", LargeBinary, nullable=False),
        Column("score", REAL, nullable=False),
        Column("created_at", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False, primary_key=partitioned, autoincrement=False),
        Column("run_id", Text, nullable=False),
        **({"postgresql_partition_by": "RANGE (expires_at)"} if partitioned else {}),
    )
    aggregates = Table(
        "user_aggregates",
        md,
        Column("version_id", Text, primary_key=True),
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("vector", LargeBinary, nullable=False),
        Column("pair_count", Integer, nullable=False),
        Column("window_hours", Integer, nullable=False),
        *_times(),
        Column("run_id", Text, nullable=False),
    )
    neighbours = Table(
        "user_neighbours",
        md,
        Column("version_id", Text, primary_key=True),
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("neighbour_id", BigInteger, primary_key=True, autoincrement=False),
        Column("similarity", REAL, nullable=False),
        *_times(),
        Column("run_id", Text, nullable=False),
    )
    items = Table(
        "item_neighbours",
        md,
        Column("version_id", Text, primary_key=True),
        Column("item_id", BigInteger, primary_key=True, autoincrement=False),
        Column("neighbours", LargeBinary, nullable=False),
        *_times(),
        Column("run_id", Text, nullable=False),
    )
    Table(
        "item_list_generations",
        md,
        Column("version_id", Text, primary_key=True),
        Column("generation", BigInteger, nullable=False),
    )
    exposure = Table(
        "exposure_counts",
        md,
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("counts", LargeBinary, nullable=False),
        Column("item_count", Integer, nullable=False),
        *_times(),
        Column("run_id", Text, nullable=False),
    )
    for table in (pairs, aggregates, neighbours, items, exposure):
        Index(f"{table.name}_expires_at", table.c.expires_at)
    Table(
        "precompute_runs",
        md,
        Column("run_id", Text, primary_key=True),
        Column("interval_start", BigInteger, nullable=False),
        Column("interval_end", BigInteger, nullable=False),
        Column("fm_version", Text, nullable=False),
        Column("ae_version", Text, nullable=False),
        Column("vm_version", Text, nullable=False),
        Column("embedding_version", Text, nullable=False),
        Column("status", Text, nullable=False),
        Column("counts", Text, nullable=False),
        Column("timings", Text, nullable=False),
        Column("started_at", BigInteger, nullable=False),
        Column("finished_at", BigInteger, nullable=True),
        Column("figures", Text, nullable=False),
    )
    return md
