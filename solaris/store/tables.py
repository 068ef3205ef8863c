"""The store's tables, declared once: both dialects' DDL is compiled from this (:func:`schema_statements`).

Times are integer UTC epoch microseconds; vectors are little-endian float16 (or the version's dtype) bytes.
What differs by dialect is declared here: on PostgreSQL ``pair_embeddings`` is range-partitioned by
``expires_at``, one partition per expiry hour created on demand (``create_pair_partition.sql``), so that
expiry drops whole partitions; a unique key on a partitioned table must hold the partition key, so there
(version_id, user_id, item_id) alone is kept unique by the writer (``delete_pair_keys.sql`` before
``insert_pairs.sql``, in one transaction, under an advisory lock). What a store made by an earlier release
lacks is added by each dialect's ``migrate.sql``.
"""

from __future__ import annotations

from sqlalchemy import REAL, BigInteger, Column, Dialect, Index, Integer, LargeBinary, MetaData, Table, Text
from sqlalchemy.schema import CreateIndex, CreateTable

from solaris.store.sqlfiles import DIALECTS, statements


def _stamp() -> list[Column]:
    """The columns every row of one write batch shares (:class:`~solaris.store.validate.Stamp`), in table order."""
    return [
        Column("created_at", BigInteger, nullable=False),
        Column("expires_at", BigInteger, nullable=False),
        Column("run_id", Text, nullable=False),
    ]


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
        *_stamp(),
    )
    neighbours = Table(
        "user_neighbours",
        md,
        Column("version_id", Text, primary_key=True),
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("neighbour_id", BigInteger, primary_key=True, autoincrement=False),
        Column("similarity", REAL, nullable=False),
        *_stamp(),
    )
    # The A2A tier's item lists, one row per item: its similar items as little-endian int32 ids, then their
    # float32 similarities (k of each, padded with id -1). A read fetches the requested items' rows by key and
    # matches them to the user's pairs in numpy: one row per item, not k.
    items = Table(
        "item_neighbours",
        md,
        Column("version_id", Text, primary_key=True),
        Column("item_id", BigInteger, primary_key=True, autoincrement=False),
        Column("neighbours", LargeBinary, nullable=False),
        *_stamp(),
    )
    # Each version's item lists carry a generation, moved in the transaction of every write of its lists and
    # of every expiry that deletes lists: the lists change once an hour, so a reader holds a version's lists in
    # memory and reads only their generation with each request (solaris/store/item_lists.py).
    Table(
        "item_list_generations",
        md,
        Column("version_id", Text, primary_key=True),
        Column("generation", BigInteger, nullable=False),
    )
    # Each user's impression counters (solaris/exposure.py), one row per user, not scoped to an embedding
    # version: its count per window, then the item ids it was shown, then each one's count per window, as
    # little-endian int32 (codec.encode_exposure); item_count says how many items. A read fetches the
    # requested users' rows by key: one row per user, not one per (user, item).
    exposure = Table(
        "exposure_counts",
        md,
        Column("user_id", BigInteger, primary_key=True, autoincrement=False),
        Column("counts", LargeBinary, nullable=False),
        Column("item_count", Integer, nullable=False),
        *_stamp(),
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
        Column("reason", Text, nullable=True),  # why a run failed, where the store was told
        Column("selector", Text, nullable=True),  # the selector the run ran (None: recorded before)
        Column("selector_reason", Text, nullable=True),  # and why
    )
    return md


def schema_statements(dialect: Dialect) -> list[str]:
    """The DDL that creates every missing table and index (idempotent), then the dialect's migrations."""
    metadata = build_metadata(dialect.name)
    ddl = []
    for table in metadata.sorted_tables:
        ddl.append(str(CreateTable(table, if_not_exists=True).compile(dialect=dialect)).strip())
        ddl += [str(CreateIndex(index, if_not_exists=True).compile(dialect=dialect)).strip() for index in table.indexes]
    return ddl + statements(dialect.name, "migrate")
