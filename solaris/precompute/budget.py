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

from solaris.precompute.selection import ranked, select_ranked

FM_CALLS_PER_PAIR = 1.0


def pair_values(requested_probability: np.ndarray, gain: np.ndarray) -> np.ndarray:
    return requested_probability * gain / FM_CALLS_PER_PAIR


def check_budget(fm_budget: int, min_demand: float) -> None:
    if fm_budget < 1:
        raise ValueError(f"fm_budget must be a positive number of FM calls, got {fm_budget}")
    if not 0 <= min_demand <= 1:
        raise ValueError(f"min_demand must be a probability in [0, 1], got {min_demand}")


def rank_by_value(scored: pd.DataFrame, min_demand: float) -> pd.DataFrame:
    """The budget's ranking (:func:`~.selection.ranked`): the pairs at least ``min_demand`` likely to be
    requested are eligible; none is forced (re-queued misses compete for the budget)."""
    nothing = np.zeros(len(scored), bool)
    return ranked(scored, nothing, scored["demand"].to_numpy(np.float64) >= min_demand, None, "scored pairs")


def select_within_budget(scored: pd.DataFrame, fm_budget: int, min_demand: float) -> pd.DataFrame:
    """The ``fm_budget`` rows of highest ``score`` among those whose ``demand`` (P(requested while fresh)) is at
    least ``min_demand`` (fewer when fewer are), best first; ties go to the lower user id, then the lower item
    id, so a rerun selects the same pairs. ``forced`` is all False."""
    check_budget(fm_budget, min_demand)
    return select_ranked(rank_by_value(scored, min_demand), fm_budget)
