"""The SOLARIS variants see exactly their tiers: the ladder adds one tier per rung, the ablation drops A2A."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from solaris.eval.variants import TIER_LADDER, TIER_STEPS, WITHOUT_A2A, inputs
from solaris.models.features import VM_BASE_COLUMNS, FEEDING_ORDER, TIERS

DIM = 3


def _tier_columns(x: np.ndarray, tier: str) -> np.ndarray:
    start = len(VM_BASE_COLUMNS) + TIERS.index(tier) * (DIM + 1)
    return x[:, start : start + DIM + 1]


def test_each_rung_adds_the_next_tier_of_the_feeding_order() -> None:
    assert [v.tiers for v in TIER_LADDER] == [FEEDING_ORDER[: k + 1] for k in range(len(FEEDING_ORDER))]
    assert [step[0] for step in TIER_STEPS] == list(FEEDING_ORDER)
    assert all(step[2] == rung.name for step, rung in zip(TIER_STEPS, TIER_LADDER, strict=True))


def test_the_ablation_zeroes_a2a_codes_and_flag_only() -> None:
    served = np.random.default_rng(0).random((5, len(VM_BASE_COLUMNS) + len(TIERS) * (DIM + 1))).astype(np.float32)
    x = inputs(WITHOUT_A2A, SimpleNamespace(served=served, base=served[:, : len(VM_BASE_COLUMNS)]), DIM)
    assert not _tier_columns(x, "a2a").any()
    for tier in ("pair", "agg", "knn"):
        np.testing.assert_array_equal(_tier_columns(x, tier), _tier_columns(served, tier))
    np.testing.assert_array_equal(x[:, : len(VM_BASE_COLUMNS)], served[:, : len(VM_BASE_COLUMNS)])
