"""The feeding order: which tier a candidate is said to be fed by, and coverage accumulated down that order."""

from __future__ import annotations

import numpy as np
import pytest

from solaris import exposure
from solaris.enrichment.tiers import (
    FED_BY,
    TIER_NAMES,
    absent,
    cumulative_coverage,
    feeding_tier,
    marginal_coverage,
    tier_values,
)
from solaris.models.features import FEEDING_ORDER, TIERS
from solaris.store.records import TierBatchRead


def _read(masks: dict[str, list[bool]]) -> TierBatchRead:
    n = len(next(iter(masks.values())))
    zeros = np.zeros((n, 2), np.float32)
    m = {tier: np.array(masks.get(tier, [False] * n)) for tier in FED_BY}
    counts = np.zeros((n, len(exposure.columns())), np.float32)
    return TierBatchRead(zeros, m["pair"], zeros, m["agg"], zeros, m["knn"], zeros, m["a2a"], counts, m["cohort"])


def test_the_feeding_order_names_every_store_tier_once_then_the_cohort_then_none() -> None:
    assert sorted(FEEDING_ORDER) == sorted(TIERS)
    assert TIER_NAMES == (*FEEDING_ORDER, "cohort", "none")


def test_each_row_is_fed_by_the_first_tier_present_in_the_feeding_order() -> None:
    # Row k has the tiers from FED_BY[k] on, so it is fed by FED_BY[k]; the last row has none.
    n = len(FED_BY) + 1
    masks = {tier: [row <= k for row in range(n)] for k, tier in enumerate(FED_BY)}
    tiers = feeding_tier(_read(masks))
    assert [TIER_NAMES[t] for t in tiers] == [*FED_BY, "none"]


def test_a_cohort_code_feeds_the_vms_pair_input_and_is_reported_as_its_own_tier() -> None:
    read = _read({"cohort": [True, False], "knn": [False, True]})
    assert tier_values(read)["pair"][1].tolist() == [True, False]
    assert [TIER_NAMES[t] for t in feeding_tier(read)] == ["cohort", "knn"]


def test_a2a_feeds_before_the_user_aggregate() -> None:
    """The measured order: an item-specific value beats the user's mean code."""
    tiers = feeding_tier(_read({"a2a": [True], "agg": [True], "knn": [True]}))
    assert TIER_NAMES[tiers[0]] == "a2a"


def test_marginal_coverage_is_the_step_of_the_cumulative() -> None:
    rng = np.random.default_rng(0)
    shares = (0.4, 0.7, 0.2, 0.5, 0.3)
    masks = {tier: list(rng.random(400) < share) for tier, share in zip(FED_BY, shares, strict=True)}
    tiers = feeding_tier(_read(masks))
    cumulative, marginal = cumulative_coverage(tiers), marginal_coverage(tiers)
    assert list(cumulative) == list(marginal) == list(FED_BY)
    steps = np.diff([0.0, *cumulative.values()])
    assert list(marginal.values()) == pytest.approx(list(steps))
    any_tier = np.logical_or.reduce([np.array(m) for m in masks.values()]).mean()
    assert cumulative[FED_BY[-1]] == pytest.approx(any_tier)


def test_an_absent_read_feeds_nothing() -> None:
    assert set(feeding_tier(absent(5, 4)).tolist()) == {TIER_NAMES.index("none")}
    assert marginal_coverage(np.zeros(0, np.int8)) == dict.fromkeys(FED_BY, 0.0)
