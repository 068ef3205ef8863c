"""The verifier selector's rule (the paper's): every forced pair, then the verifier's best ``top_fraction`` of
the speculative pairs, at most ``per_user_cap`` a user.

Re-queued pairs are still scored, because the store keeps every pair's verifier score.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from solaris.precompute.fm_pool import REQUEUE, pair_arrays
from solaris.precompute.ranking import group_rank, order_by, pair_keys


def selection_budget(n_pairs: int, top_fraction: float) -> int:
    """``ceil(top_fraction * n_pairs)``: any candidate with a positive fraction sends at least one pair.

    The product is rounded to 9 decimals first so that float noise (0.7 * 10 = 7.000000000000001) cannot
    add a pair.
    """
    if not 0 < top_fraction <= 1:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    return math.ceil(round(top_fraction * n_pairs, 9))


def _checked_scores(scored: pd.DataFrame, users: np.ndarray, items: np.ndarray) -> np.ndarray:
    if "score" not in scored.columns:
        raise ValueError("scored pairs: missing column score (the verifier's output)")
    scores = scored["score"].to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        i = bad[0]
        raise ValueError(f"scored pairs: row {i} (user {users[i]}, item {items[i]}) has score {scores[i]}")
    return scores


def select_top_fraction(scored: pd.DataFrame, top_fraction: float, per_user_cap: int | None) -> pd.DataFrame:
    """The pairs to embed: every forced pair, then the best speculative pairs by verifier ``score``.

    Forced pairs are the rows whose ``source`` is ``requeue`` (none without a source column). Of the
    ``n`` speculative rows, exactly ``selection_budget(n, top_fraction)`` are taken (fewer only when the
    cap leaves fewer eligible), best score first, skipping any pair that would give its user more than
    ``per_user_cap`` speculative pairs. Ties go to the lower user id, then the lower item id, so a rerun
    selects the same pairs. Returns the chosen rows, forced first, with a bool ``forced`` column added.
    """
    if per_user_cap is not None and per_user_cap < 1:
        raise ValueError(f"per_user_cap must be at least 1 or None, got {per_user_cap}")
    users, items = pair_arrays(scored, "scored pairs")
    scores = _checked_scores(scored, users, items)
    forced = np.zeros(len(users), bool)
    if "source" in scored.columns:
        forced = (scored["source"] == REQUEUE).to_numpy()
    budget = selection_budget(int((~forced).sum()), top_fraction)
    keys, user_codes = pair_keys(users, items)
    by_pair = np.argsort(keys, kind="stable")
    repeats = np.flatnonzero(np.diff(keys[by_pair]) == 0)
    if len(repeats):
        i = by_pair[repeats[0] + 1]
        raise ValueError(f"scored pairs: row {i} repeats pair (user {users[i]}, item {items[i]})")
    # A stable sort by score on top of (user, item) order breaks score ties by user, then item.
    ranked = by_pair[~forced[by_pair]]
    ranked = ranked[np.argsort(-scores[ranked], kind="stable")]
    if per_user_cap is not None:
        per_user = order_by(user_codes[ranked], np.arange(len(ranked)))  # each user's pairs, best first
        rank_in_user = np.empty(len(ranked), np.int64)
        rank_in_user[per_user] = group_rank(user_codes[ranked][per_user])
        ranked = ranked[rank_in_user < per_user_cap]
    rows = np.r_[np.flatnonzero(forced), ranked[:budget]]
    return scored.iloc[rows].assign(forced=forced[rows]).reset_index(drop=True)
