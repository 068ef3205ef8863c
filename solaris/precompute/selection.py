"""How a selector's rule takes pairs when the pool is split among user shards, exactly as it would whole.

Each shard ranks its scored pool (:func:`ranked`): the pairs its rule may take, best first by score, ties to
the lower user id then the lower item id; the pairs it must take (``forced``: re-queued misses); the pairs it
passes over. One task then reads the head of every shard's ranking, no more rows of each than the quota, and
finds the last pair the quota reaches in the order over all shards (:func:`cut_of`); each shard takes its pairs
up to that one (:func:`take`). The order is total, so the pairs taken are those one task would take from the
whole pool, and never more than the quota. One shard is the same three calls (:func:`select_ranked`).
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np
import pandas as pd

from solaris.precompute.fm_pool import pair_arrays
from solaris.precompute.ranking import group_rank, order_by, pair_keys

# A row's rank class, as it is stored beside the scored pool; a shard's ranking lists them in this order.
ELIGIBLE, FORCED, PASSED = 0, 1, 2
RANK_CLASS = "rank_class"
CUT_COLUMNS = ["score", "user_id", "item_id"]
CUT_DTYPES = (np.float64, np.int64, np.int64)


def ranked(
    scored: pd.DataFrame, forced: np.ndarray, eligible: np.ndarray, per_user_cap: int | None, what: str
) -> pd.DataFrame:
    """``scored`` with its ``rank_class``: the eligible rows first, best first, at most ``per_user_cap`` a user
    (the rest pass), then the forced ones in their order, then those passed over."""
    if per_user_cap is not None and per_user_cap < 1:
        raise ValueError(f"per_user_cap must be at least 1 or None, got {per_user_cap}")
    users, items = pair_arrays(scored, what)
    if "score" not in scored.columns:
        raise ValueError(f"{what}: missing column score (the selector's output)")
    scores = scored["score"].to_numpy(np.float64)
    if len(bad := np.flatnonzero(~np.isfinite(scores))):
        i = int(bad[0])
        raise ValueError(f"{what}: row {i} (user {users[i]}, item {items[i]}) has score {scores[i]}")
    keys, user_codes = pair_keys(users, items)
    by_pair = np.argsort(keys, kind="stable")
    if len(repeats := np.flatnonzero(np.diff(keys[by_pair]) == 0)):
        i = int(by_pair[repeats[0] + 1])
        raise ValueError(f"{what}: row {i} repeats pair (user {users[i]}, item {items[i]})")
    # A stable sort by score on top of (user, item) order breaks score ties by user, then item.
    order = by_pair[np.argsort(-scores[by_pair], kind="stable")]
    classes = np.where(forced, FORCED, np.where(eligible, ELIGIBLE, PASSED)).astype(np.int8)
    if per_user_cap is not None:
        candidates = order[classes[order] == ELIGIBLE]
        per_user = order_by(user_codes[candidates], np.arange(len(candidates)))  # each user's pairs, best first
        rank_in_user = np.empty(len(candidates), np.int64)
        rank_in_user[per_user] = group_rank(user_codes[candidates][per_user])
        classes[candidates[rank_in_user >= per_user_cap]] = PASSED
    rows = np.r_[order[classes[order] == ELIGIBLE], np.flatnonzero(classes == FORCED), order[classes[order] == PASSED]]
    return scored.iloc[rows].assign(**{RANK_CLASS: classes[rows]}).reset_index(drop=True)


def eligible_head(ranking: pd.DataFrame) -> pd.DataFrame:
    return ranking.loc[ranking[RANK_CLASS].to_numpy() == ELIGIBLE, CUT_COLUMNS]


def cut_of(heads: Sequence[pd.DataFrame], quota: int, eligible: int) -> pd.DataFrame:
    """The ``quota``-th best of the ``eligible`` rows over every shard, given each shard's best ``quota`` (or
    all it has): one row of :data:`CUT_COLUMNS`, or none when there are no more than ``quota`` (take them all)."""
    if quota < 0:
        raise ValueError(f"a selection quota is a number of pairs, got {quota}")
    if eligible <= quota:
        return pd.DataFrame({c: pd.Series(dtype=t) for c, t in zip(CUT_COLUMNS, CUT_DTYPES, strict=True)})
    rows = pd.concat([head[CUT_COLUMNS] for head in heads], ignore_index=True)
    if quota == 0 or len(rows) < quota:
        raise ValueError(f"the heads hold {len(rows)} of {eligible} eligible rows, short of the quota {quota}")
    scores = rows["score"].to_numpy(np.float64)
    users, items = rows["user_id"].to_numpy(np.int64), rows["item_id"].to_numpy(np.int64)
    last = np.lexsort((items, users, -scores))[quota - 1]
    return pd.DataFrame({"score": [scores[last]], "user_id": [users[last]], "item_id": [items[last]]})


def take(ranking: pd.DataFrame, cut: pd.DataFrame) -> pd.DataFrame:
    """The rows a shard takes: every forced one, then the eligible ones up to and with ``cut`` (all without
    one), best first; a ``forced`` column instead of the rank class."""
    classes = ranking[RANK_CLASS].to_numpy()
    eligible = classes == ELIGIBLE
    if len(cut):
        score, user, item = float(cut["score"].iloc[0]), int(cut["user_id"].iloc[0]), int(cut["item_id"].iloc[0])
        s = ranking["score"].to_numpy(np.float64)
        u, i = ranking["user_id"].to_numpy(np.int64), ranking["item_id"].to_numpy(np.int64)
        eligible &= (s > score) | ((s == score) & ((u < user) | ((u == user) & (i <= item))))
    rows = np.r_[np.flatnonzero(classes == FORCED), np.flatnonzero(eligible)]
    return ranking.iloc[rows].drop(columns=RANK_CLASS).assign(forced=classes[rows] == FORCED).reset_index(drop=True)


def select_ranked(ranking: pd.DataFrame, quota: int) -> pd.DataFrame:
    """One shard's whole selection: its own cut, then :func:`take`."""
    head = eligible_head(ranking)
    return take(ranking, cut_of([head], quota, len(head)))
