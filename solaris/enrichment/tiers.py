"""The fallback hierarchy as arrays: which tier fed each candidate, and the VM inputs built from a read.

The VM sees every tier at once (codes plus presence flags), so one forward pass serves all candidates; the
tier reported per candidate is the first present in :data:`FED_BY`: the feeding order of the VM's tiers
(:data:`~solaris.models.features.FEEDING_ORDER`), then the cohort code, which feeds the pair input (it is the
FM's pair code for a user new to it, :mod:`solaris.enrichment.cohorts`), then none. The precompute's verifier
and the replay build their inputs here too, so all three feed the VM alike.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

from solaris import exposure
from solaris.models.features import FEEDING_ORDER, vm_base_matrix
from solaris.store.records import TierBatchRead

if TYPE_CHECKING:  # torch: only served_inputs needs it, and the precompute's coverage and the UI do not
    from solaris.models.vm import VerticalModel

FED_BY = (*FEEDING_ORDER, "cohort")
TIER_NAMES = (*FED_BY, "none")
PAIR, A2A, AGG, KNN, COHORT, NONE = (TIER_NAMES.index(name) for name in ("pair", "a2a", "agg", "knn", "cohort", "none"))


def absent(n: int, dim: int) -> TierBatchRead:
    """A read that found nothing: what the ranker serves when the store is down or too slow."""
    vectors, mask = np.zeros((n, dim), np.float32), np.zeros(n, bool)
    counts = np.zeros((n, len(exposure.columns())), np.float32)
    return TierBatchRead(vectors, mask, vectors, mask, vectors, mask, vectors, mask, counts, mask)


def tier_values(read: TierBatchRead) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    """Each tier's (codes, presence mask), by the names the VM's inputs use: a cohort code is a pair code."""
    return {
        "pair": (read.pair, read.pair_mask | read.cohort_mask),
        "agg": (read.user_agg, read.user_agg_mask),
        "knn": (read.knn, read.knn_mask),
        "a2a": (read.a2a, read.a2a_mask),
    }


def presence(read: TierBatchRead) -> dict[str, np.ndarray]:
    """Per tier of :data:`FED_BY`, which rows it has a value for (``pair``: the user's own code only)."""
    return {
        "pair": read.pair_mask,
        "a2a": read.a2a_mask,
        "agg": read.user_agg_mask,
        "knn": read.knn_mask,
        "cohort": read.cohort_mask,
    }


def feeding_tier(read: TierBatchRead) -> np.ndarray:
    """Per row, the code of the first tier present (int8, see :data:`TIER_NAMES`)."""
    tier = np.full(len(read.pair_mask), NONE, np.int8)
    masks = presence(read)
    for code in reversed(range(len(FED_BY))):
        tier[masks[FED_BY[code]]] = code
    return tier


def tier_counts(tiers: np.ndarray) -> dict[str, int]:
    counts = np.bincount(tiers, minlength=len(TIER_NAMES))
    return {name: int(c) for name, c in zip(TIER_NAMES, counts, strict=True)}


def cumulative_coverage(tiers: np.ndarray) -> dict[str, float]:
    """Per tier of the feeding order, the share of rows fed by it or a tier before it."""
    n = len(tiers)
    return {name: float((tiers <= k).mean()) if n else 0.0 for k, name in enumerate(FED_BY)}


def marginal_coverage(tiers: np.ndarray) -> dict[str, float]:
    """Per tier, the share of rows it fed first: what it adds over the tiers before it in the feeding order."""
    n = len(tiers)
    return {name: float((tiers == k).mean()) if n else 0.0 for k, name in enumerate(FED_BY)}


def served_inputs(
    vm: VerticalModel,
    version: str,
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    ts_us: np.ndarray,
    positions: np.ndarray,
    read: TierBatchRead,
) -> np.ndarray:
    """The VM's input matrix for these pairs from a store read of ``version`` (refused if the VM was trained
    on another embedding version)."""
    from solaris.models.vm_data import vm_inputs

    base = vm_base_matrix(user_ids, item_ids, ts_us, positions, read.exposure)
    return vm_inputs(vm.config, version, base, tier_values(read))
