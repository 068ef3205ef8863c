"""The fallback hierarchy as arrays: which tier fed each candidate, and the VM inputs built from a read.

The VM sees every tier at once (codes plus presence flags), so one forward pass serves all candidates; the
tier reported per candidate is the first present in the order pair -> user aggregate -> neighbours -> none.
The precompute's verifier and the replay build their inputs here too, so all three feed the VM alike.
"""

from __future__ import annotations

import numpy as np

from solaris.models.features import base_matrix
from solaris.models.vm import VerticalModel
from solaris.models.vm_data import vm_inputs
from solaris.store.base import TierBatchRead

TIER_NAMES = ("pair", "agg", "knn", "none")
PAIR, AGG, KNN, NONE = range(len(TIER_NAMES))


def absent(n: int, dim: int) -> TierBatchRead:
    """A read that found nothing: what the ranker serves when the store is down or too slow."""
    vectors, mask = np.zeros((n, dim), np.float32), np.zeros(n, bool)
    return TierBatchRead(vectors, mask, vectors, mask, vectors, mask)


def feeding_tier(read: TierBatchRead) -> np.ndarray:
    """Per row, the code of the first tier present (int8, see :data:`TIER_NAMES`)."""
    tier = np.full(len(read.pair_mask), NONE, np.int8)
    tier[read.knn_mask] = KNN
    tier[read.user_agg_mask] = AGG
    tier[read.pair_mask] = PAIR
    return tier


def tier_counts(tiers: np.ndarray) -> dict[str, int]:
    counts = np.bincount(tiers, minlength=len(TIER_NAMES))
    return {name: int(c) for name, c in zip(TIER_NAMES, counts, strict=True)}


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
    base = base_matrix(user_ids, item_ids, ts_us, positions)
    tiers = {
        "pair": (read.pair, read.pair_mask),
        "agg": (read.user_agg, read.user_agg_mask),
        "knn": (read.knn, read.knn_mask),
    }
    return vm_inputs(vm.config, version, base, tiers)
