"""The verifier selector's rule (the paper's): every forced pair, then the verifier's best ``top_fraction`` of
the speculative pairs, at most ``per_user_cap`` a user.

Re-queued pairs are still scored, because the store keeps every pair's verifier score.
"""

from __future__ import annotations

import math

import numpy as np
import pandas as pd

from solaris.precompute.fm_pool import REQUEUE
from solaris.precompute.selection import ranked, select_ranked


def selection_budget(n_pairs: int, top_fraction: float) -> int:
    """``ceil(top_fraction * n_pairs)``: any candidate with a positive fraction sends at least one pair.

    The product is rounded to 9 decimals first so that float noise (0.7 * 10 = 7.000000000000001) cannot
    add a pair.
    """
    if not 0 < top_fraction <= 1:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    return math.ceil(round(top_fraction * n_pairs, 9))


def requeued(scored: pd.DataFrame) -> np.ndarray:
    """The forced rows: those whose ``source`` is ``requeue`` (none without a source column)."""
    if "source" not in scored.columns:
        return np.zeros(len(scored), bool)
    return (scored["source"] == REQUEUE).to_numpy()


def rank_top_fraction(scored: pd.DataFrame, per_user_cap: int | None) -> pd.DataFrame:
    """The verifier's ranking (:func:`~.selection.ranked`): every speculative pair is eligible, within the cap."""
    forced = requeued(scored)
    return ranked(scored, forced, ~forced, per_user_cap, "scored pairs")


def select_top_fraction(scored: pd.DataFrame, top_fraction: float, per_user_cap: int | None) -> pd.DataFrame:
    """The pairs to embed: every forced pair, then the best speculative pairs by verifier ``score``.

    Of the ``n`` speculative rows, exactly ``selection_budget(n, top_fraction)`` are taken (fewer only when
    the cap leaves fewer eligible), best score first, skipping any pair that would give its user more than
    ``per_user_cap`` speculative pairs. Ties go to the lower user id, then the lower item id, so a rerun
    selects the same pairs. Returns the chosen rows, forced first, with a bool ``forced`` column added.
    """
    quota = selection_budget(int((~requeued(scored)).sum()), top_fraction)
    return select_ranked(rank_top_fraction(scored, per_user_cap), quota)
