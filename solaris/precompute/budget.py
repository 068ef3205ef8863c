"""Budget-aware selection: the pairs worth most per FM call, up to the hour's FM budget.

A pair's value is P(requested while fresh) x the expected gain of a pair code over what the lower tiers
already give that pair (the gain for what the user falls back to) / its FM cost. Every pair costs one FM forward of the same
size, so the cost is a constant and the ranking is by P x gain. Re-queued misses are scored like any other
pair (their recent request is strong evidence of demand) and compete for the same budget: the budget is
never exceeded. A pair whose P is below the run's ``min_demand`` is not worth a call at all: the budget is a
cap, and a quiet hour may spend less of it.
"""

from __future__ import annotations

import numpy as np
import pandas as pd

from solaris.precompute.ranking import pair_keys

FM_CALLS_PER_PAIR = 1.0


def pair_values(requested_probability: np.ndarray, gain: np.ndarray) -> np.ndarray:
    return requested_probability * gain / FM_CALLS_PER_PAIR


def select_within_budget(scored: pd.DataFrame, fm_budget: int, min_demand: float) -> pd.DataFrame:
    """The ``fm_budget`` rows of highest ``score`` among those whose ``demand`` (P(requested while fresh)) is at
    least ``min_demand`` (fewer when fewer are), best first; ties go to the lower user id, then the lower item
    id, so a rerun selects the same pairs. ``forced`` is all False."""
    if fm_budget < 1:
        raise ValueError(f"fm_budget must be a positive number of FM calls, got {fm_budget}")
    if not 0 <= min_demand <= 1:
        raise ValueError(f"min_demand must be a probability in [0, 1], got {min_demand}")
    scored = scored[scored["demand"].to_numpy(np.float64) >= min_demand]
    users = scored["user_id"].to_numpy(np.int64)
    scores = scored["score"].to_numpy(np.float64)
    if not np.isfinite(scores).all():
        i = int(np.flatnonzero(~np.isfinite(scores))[0])
        raise ValueError(f"scored pairs: row {i} (user {users[i]}) has score {scores[i]}")
    keys, _ = pair_keys(users, scored["item_id"].to_numpy(np.int64))
    by_pair = np.argsort(keys, kind="stable")
    ranked = by_pair[np.argsort(-scores[by_pair], kind="stable")][:fm_budget]
    return scored.iloc[ranked].assign(forced=False).reset_index(drop=True)
