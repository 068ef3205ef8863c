"""How well the precompute served the hour just past: hit rate of its pairs and coverage by serving tier.

- hit rate: of the pairs the previous run wrote, the share requested during the hour they were made for;
- coverage: of the (request, candidate) pairs served in the last hour, the share for which each tier
  (pair, user aggregate, neighbours) held a fresh value, the share with any tier, and the share only the
  neighbours covered (``coverage_knn_only``: the neighbour tier's marginal coverage).

Coverage must be measured before this run writes: the run replaces user aggregates and neighbour rows, and
once they are gone the store no longer knows what was served. Runs write on hour boundaries, so the store
was constant over the last hour and one read at its last instant gives what every request saw.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.models.features import TIERS
from solaris.precompute.codelog import CodeLog
from solaris.precompute.ranking import pair_keys
from solaris.store.base import FeatureStore

INSTANT = timedelta(microseconds=1)


def requested_pairs(log: EventLog, start: datetime, end: datetime) -> tuple[np.ndarray, np.ndarray]:
    """(user_ids, item_ids) of every (request, candidate) in ``[start, end)``, one row per occurrence."""
    table = log.requests(start, end, columns=["user_id", "candidates"])
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    users = np.repeat(table["user_id"].to_numpy().astype(np.int64), lengths)
    return users, pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def hit_rate(log: EventLog, codes: CodeLog, interval_start: datetime) -> dict[str, float]:
    """Share of the pairs written for the previous hour that were requested during it."""
    previous = interval_start - HOUR
    written = codes.read(previous, interval_start)
    users, items = requested_pairs(log, previous, interval_start)
    n_written = len(written.user_ids)
    if not n_written:
        return {"hit_rate": 0.0, "previous_pairs": 0, "previous_hits": 0}
    keys, _ = pair_keys(np.r_[written.user_ids, users], np.r_[written.item_ids, items])
    hits = int(np.isin(np.unique(keys[:n_written]), keys[n_written:]).sum())
    return {"hit_rate": hits / n_written, "previous_pairs": n_written, "previous_hits": hits}


def coverage(store: FeatureStore, version: str, log: EventLog, interval_start: datetime) -> dict[str, float]:
    """Per tier, the share of the last hour's served pairs it covered (``coverage_<tier>``), ``_any``, and
    ``_knn_only``: the share the neighbours covered with neither a pair code nor an aggregate."""
    users, items = requested_pairs(log, interval_start - HOUR, interval_start)
    found: dict[str, float] = {"served_pairs": len(users)}
    if not len(users):
        return found | {f"coverage_{tier}": 0.0 for tier in (*TIERS, "any", "knn_only")}
    read = store.read_tiers_batch(version, users, items, interval_start - INSTANT)
    masks = {"pair": read.pair_mask, "agg": read.user_agg_mask, "knn": read.knn_mask}
    masks["any"] = masks["pair"] | masks["agg"] | masks["knn"]
    masks["knn_only"] = masks["knn"] & ~masks["pair"] & ~masks["agg"]
    return found | {f"coverage_{tier}": float(mask.mean()) for tier, mask in masks.items()}
