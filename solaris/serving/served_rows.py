"""Features as served joined, row for row, to the impressions they were served for (by request and item).

The replay scores models on these rows; the demand model's training estimates what a pair code is worth
from them. A VM may only ever be fed the codes of its own embedding version, so a join refuses rows served
with another.
"""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris import exposure
from solaris.data.eventlog import EventLog
from solaris.models.features import TIERS, base_matrix, pair_key, ts_micros
from solaris.models.splits import Span
from solaris.serving.servedlog import read_served, served_codes


def joined(
    log: EventLog, span: Span, served_dir: Path, embedding_version: str, code_dim: int, every_impression: bool = True
) -> tuple[pa.Table, pa.Table]:
    """The span's impressions and, row for row, what was served for each. ``every_impression`` False keeps
    only the impressions that have a served row (production's log may have dropped a batch)."""
    shown = log.impressions(span.start, span.end)
    served = read_served(served_dir, span.start, span.end, code_dim)
    versions = set(pc.unique(served["embedding_version"]).to_pylist())
    if versions - {embedding_version}:
        raise ValueError(
            f"{span} was served with embedding versions {sorted(versions)}, expected only {embedding_version!r}"
        )
    order, found = match(shown, served, every_impression)
    return shown.filter(pa.array(found)), served.take(pa.array(order[found]))


def base_columns(shown: pa.Table) -> tuple[np.ndarray, ...]:
    return (
        shown["user_id"].to_numpy(),
        shown["item_id"].to_numpy(),
        ts_micros(shown["ts"]),
        shown["position"].to_numpy(),
    )


def served_matrix(shown: pa.Table, served: pa.Table) -> np.ndarray:
    """The SOLARIS VM's input rows exactly as served: base columns, counters, then each tier's code and flag."""
    counters = np.stack([served[name].to_numpy() for name in exposure.columns()], axis=1)
    blocks = [base_matrix(*base_columns(shown)), counters]
    for tier in TIERS:
        blocks += [served_codes(served, tier), served[f"{tier}_flag"].to_numpy().astype(np.float32)[:, None]]
    return np.concatenate(blocks, axis=1, dtype=np.float32)


def match(shown: pa.Table, served: pa.Table, every_impression: bool = True) -> tuple[np.ndarray, np.ndarray]:
    """Index into ``served`` of each shown impression, and whether it has one; each served pair must be
    unique, and with ``every_impression`` every impression must have been served."""
    keys = [_key(t) for t in (shown, served)]
    if len(np.unique(keys[1])) != len(keys[1]):
        raise ValueError("the served log holds a (request, item) pair twice: was an hour served twice?")
    order = np.argsort(keys[1])
    at = np.searchsorted(keys[1], keys[0], sorter=order)
    found = order[np.minimum(at, len(order) - 1)] if len(order) else np.zeros(len(keys[0]), np.int64)
    missing = (at >= len(order)) | (keys[1][found] != keys[0]) if len(order) else np.ones(len(keys[0]), bool)
    if every_impression and missing.any():
        raise ValueError(f"{int(missing.sum())} impressions have no served row: the replay did not serve their hour")
    return found, ~missing


def _key(table: pa.Table) -> np.ndarray:
    request = pc.fill_null(table["request_id"], -1).to_numpy().astype(np.int64)
    return pair_key(request, table["item_id"].to_numpy().astype(np.int64))
