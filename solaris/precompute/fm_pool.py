"""The pool of pairs that may go to the FM this run: speculative candidates, plus re-queued misses, minus the
still fresh.

The FM is the expensive step, so it only sees pairs that need it: the speculative candidates, plus the
pairs that were requested in the last hour and found no fresh embedding (the paper's re-queue), minus pairs
whose stored embedding will still be fresh when the coming interval ends. A selector
(:mod:`solaris.precompute.selectors`) then chooses from this pool.

Re-queued pairs are forced: they are observed demand, not speculation, so no selector can reject them and
no budget or cap counts them. The intended order: ``add_requeued`` -> ``drop_still_fresh`` -> a selector
(dropping fresh pairs first spends the budget only on pairs that need the FM).
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np
import pandas as pd

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR, as_utc
from solaris.precompute.candidates import SOURCES
from solaris.precompute.quality import requested_pairs
from solaris.precompute.ranking import pair_keys
from solaris.precompute.spec import EVERY_USER, UserShard
from solaris.store import FeatureStore

# The store's ``fresh_pairs`` with the embedding version bound: (user_ids, item_ids, t) -> bool mask of the
# pairs that hold an embedding with created_at <= t < expires_at.
FreshMask = Callable[[np.ndarray, np.ndarray, datetime], np.ndarray]

REQUEUE = "requeue"
POOL_SOURCES = (*SOURCES, REQUEUE)


def pair_arrays(pairs: pd.DataFrame, what: str) -> tuple[np.ndarray, np.ndarray]:
    missing = [c for c in ("user_id", "item_id") if c not in pairs.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}")
    return pairs["user_id"].to_numpy(np.int64), pairs["item_id"].to_numpy(np.int64)


def _checked_mask(mask: np.ndarray, n: int) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.shape != (n,) or mask.dtype != np.bool_:
        raise ValueError(f"fresh mask must be a bool array of shape ({n},), got {mask.dtype} {mask.shape}")
    return mask


def add_requeued(candidates: pd.DataFrame, requeued: pd.DataFrame) -> pd.DataFrame:
    """The run's pool ``[user_id, item_id, source, covisit_strength]``: candidates plus re-queued pairs, each
    pair once.

    A pair that is both a candidate and a re-queued miss is labelled ``requeue``, so it is forced, and keeps
    the candidate's co-visit strength; one the generator did not keep has none (0), like any pair it would
    not propose.
    """
    req_users, req_items = pair_arrays(requeued, "re-queued pairs")
    cand_users, cand_items = pair_arrays(candidates, "candidates")
    users, items = np.r_[req_users, cand_users], np.r_[req_items, cand_items]
    sources = pd.Categorical(candidates["source"], categories=POOL_SOURCES).codes
    codes = np.r_[np.full(len(req_users), POOL_SOURCES.index(REQUEUE), np.int8), sources]
    if (codes < 0).any():
        bad = np.flatnonzero(codes < 0)[0] - len(req_users)
        raise ValueError(f"candidates: row {bad} has source {candidates['source'].iloc[bad]!r}")
    strength = np.r_[np.zeros(len(req_users), np.int64), candidates["covisit_strength"].to_numpy(np.int64)]
    _, first, per_row = np.unique(pair_keys(users, items)[0], return_index=True, return_inverse=True)
    per_pair = np.zeros(len(first), np.int64)
    np.maximum.at(per_pair, per_row.ravel(), strength)  # a re-queued candidate keeps the candidate's strength
    in_order = np.argsort(first)  # each pair's first row, in the rows' order: re-queued pairs first
    keep = first[in_order]
    return pd.DataFrame(
        {
            "user_id": users[keep],
            "item_id": items[keep],
            "source": pd.Categorical.from_codes(codes[keep], categories=POOL_SOURCES),
            "covisit_strength": per_pair[in_order],
        }
    )


def requeue_misses(
    log: EventLog,
    interval_start: datetime,
    fresh: FreshMask,
    lookback: timedelta = HOUR,
    users: UserShard = EVERY_USER,
) -> pd.DataFrame:
    """Pairs of ``users`` requested in ``[interval_start - lookback, interval_start)`` with no fresh embedding
    at ``interval_start``: ``[user_id, item_id, source="requeue"]``, distinct.

    Freshness is checked once, at ``interval_start``, in one batched call: a pair missed when requested but
    embedded since is not queued again, and a pair that was covered when requested but has expired since
    is queued, since the coming interval will miss it too.
    """
    start = as_utc(interval_start)
    user_ids, item_ids = requested_pairs(log, start - lookback, start, users)
    pairs = pd.DataFrame({"user_id": user_ids, "item_id": item_ids}).drop_duplicates(ignore_index=True)
    if pairs.empty:
        return pairs.assign(source=REQUEUE)
    covered = _checked_mask(fresh(pairs["user_id"].to_numpy(), pairs["item_id"].to_numpy(), start), len(pairs))
    return pairs[~covered].reset_index(drop=True).assign(source=REQUEUE)


def drop_still_fresh(pairs: pd.DataFrame, fresh: FreshMask, until: datetime) -> pd.DataFrame:
    """``pairs`` without those whose stored embedding is still fresh at ``until``.

    Pass the end of the interval the new embeddings will serve: a pair fresh until then gains nothing from
    being recomputed now, while one expiring earlier would leave a gap before the next run.
    """
    users, items = pair_arrays(pairs, "pairs")
    if not len(users):
        return pairs.reset_index(drop=True)  # no store round trip for nothing
    still_fresh = _checked_mask(fresh(users, items, as_utc(until)), len(pairs))
    return pairs[~still_fresh].reset_index(drop=True)


def earlier_fresh(store: FeatureStore, version: str, own_user_ids: np.ndarray, own_item_ids: np.ndarray) -> FreshMask:
    """The store's freshness check, blind to the pairs this run's hour already wrote (its code log).

    A rerun must see the store as its first attempt did. The run writes only pairs with no fresh row at its
    start (see :func:`solaris.precompute.nodes.candidates`), so before the first attempt each pair it wrote was not fresh.
    """

    def fresh(user_ids: np.ndarray, item_ids: np.ndarray, t: datetime) -> np.ndarray:
        mask = store.fresh_pairs(version, user_ids, item_ids, t)
        if len(own_user_ids):
            mask &= ~_pairs_in(user_ids, item_ids, own_user_ids, own_item_ids)
        return mask

    return fresh


def _pairs_in(users: np.ndarray, items: np.ndarray, in_users: np.ndarray, in_items: np.ndarray) -> np.ndarray:
    keys, _ = pair_keys(np.r_[users, in_users], np.r_[items, in_items])
    return np.isin(keys[: len(users)], keys[len(users) :])
