"""The event schema every job reads and writes (documented in docs/events.md).

Timestamps are UTC microseconds. Ids are dense non-negative int64 (an import maps its source's ids to them:
:mod:`solaris.data.idmap`). Side features are small categorical ints in columns prefixed ``u_`` (users) and
``i_`` (items), so models can embed them without a vocabulary file.
"""

from __future__ import annotations

import pyarrow as pa

TS = pa.timestamp("us", tz="UTC")

REQUESTS = pa.schema(
    [
        pa.field("request_id", pa.int64(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("user_id", pa.int64(), nullable=False),
        # What the retrieval stage passed to the final ranker, in retrieval order.
        pa.field("candidates", pa.list_(pa.int64()), nullable=False),
    ]
)

# When, to whom, which ad, in which slot: an impression's fields that a served row (the ranker's log) shares.
SHOWN = (
    pa.field("ts", TS, nullable=False),
    pa.field("user_id", pa.int64(), nullable=False),
    pa.field("item_id", pa.int64(), nullable=False),
    pa.field("position", pa.int16(), nullable=False),
)

IMPRESSIONS = pa.schema(
    [
        pa.field("request_id", pa.int64(), nullable=False),
        *SHOWN,
        pa.field("click", pa.int8(), nullable=False),
        pa.field("conversion", pa.int8(), nullable=False),
    ]
)

HOURLY_DATASETS = {"requests": REQUESTS, "impressions": IMPRESSIONS}

USER_FEATURE_PREFIX = "u_"
ITEM_FEATURE_PREFIX = "i_"


def side_feature_schema(id_column: str, feature_columns: list[str]) -> pa.Schema:
    return pa.schema(
        [pa.field(id_column, pa.int64(), nullable=False)]
        + [pa.field(c, pa.int32(), nullable=False) for c in feature_columns]
    )


def conform(table: pa.Table, schema: pa.Schema, what: str) -> pa.Table:
    """Select and cast ``table`` to ``schema``; a missing column is an error naming it."""
    missing = [f.name for f in schema if f.name not in table.column_names]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}")
    return table.select(schema.names).cast(schema)
