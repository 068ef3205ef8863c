"""The SOLARIS variants see exactly their tiers: the ladder adds one tier per rung, the ablation drops A2A,
and a variant without the cohort tier sees no pair input on the rows a cohort code fed."""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

from solaris.enrichment.tiers import COHORT, FED_BY, PAIR
from solaris.eval.variants import TIER_LADDER, TIER_STEPS, WITHOUT_A2A, inputs
from solaris.models.features import TIERS, VM_BASE_COLUMNS

DIM = 3


def _tier_columns(x: np.ndarray, tier: str) -> np.ndarray:
    start = len(VM_BASE_COLUMNS) + TIERS.index(tier) * (DIM + 1)
    return x[:, start : start + DIM + 1]


def test_each_rung_adds_the_next_tier_of_the_feeding_order() -> None:
    assert [v.tiers for v in TIER_LADDER] == [FED_BY[: k + 1] for k in range(len(FED_BY))]
    assert [step[0] for step in TIER_STEPS] == list(FED_BY)
    assert all(step[2] == rung.name for step, rung in zip(TIER_STEPS, TIER_LADDER, strict=True))


def test_the_ablation_zeroes_a2a_codes_and_flag_only() -> None:
    served = np.random.default_rng(0).random((5, len(VM_BASE_COLUMNS) + len(TIERS) * (DIM + 1))).astype(np.float32)
    events = SimpleNamespace(served=served, base=served[:, : len(VM_BASE_COLUMNS)], tiers=np.full(5, PAIR))
    x = inputs(WITHOUT_A2A, events, DIM)
    assert not _tier_columns(x, "a2a").any()
    for tier in ("pair", "agg", "knn"):
        np.testing.assert_array_equal(_tier_columns(x, tier), _tier_columns(served, tier))
    np.testing.assert_array_equal(x[:, : len(VM_BASE_COLUMNS)], served[:, : len(VM_BASE_COLUMNS)])


def test_without_the_cohort_tier_the_rows_it_fed_lose_their_pair_input_and_no_other_row_does() -> None:
    served = np.random.default_rng(1).random((4, len(VM_BASE_COLUMNS) + len(TIERS) * (DIM + 1))).astype(np.float32)
    tiers = np.array([PAIR, COHORT, PAIR, COHORT])
    events = SimpleNamespace(served=served, base=served[:, : len(VM_BASE_COLUMNS)], tiers=tiers)
    without, with_cohort = TIER_LADDER[-2], TIER_LADDER[-1]
    assert with_cohort.tiers[-1] == "cohort" and "cohort" not in without.tiers
    x = inputs(without, events, DIM)
    assert not _tier_columns(x, "pair")[[1, 3]].any()
    np.testing.assert_array_equal(_tier_columns(x, "pair")[[0, 2]], _tier_columns(served, "pair")[[0, 2]])
    np.testing.assert_array_equal(inputs(with_cohort, events, DIM), served)
