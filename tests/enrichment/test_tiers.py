"""The feeding order: which tier a candidate is said to be fed by, and coverage accumulated down that order."""

from __future__ import annotations

import numpy as np
import pytest

from solaris import exposure
from solaris.enrichment.tiers import (
    TIER_NAMES,
    absent,
    cumulative_coverage,
    feeding_tier,
    marginal_coverage,
)
from solaris.models.features import FEEDING_ORDER, TIERS
from solaris.store.base import TierBatchRead


def _read(masks: dict[str, list[bool]]) -> TierBatchRead:
    n = len(next(iter(masks.values())))
    zeros = np.zeros((n, 2), np.float32)
    m = {tier: np.array(masks.get(tier, [False] * n)) for tier in TIERS}
    counts = np.zeros((n, len(exposure.columns())), np.float32)
    return TierBatchRead(zeros, m["pair"], zeros, m["agg"], zeros, m["knn"], zeros, m["a2a"], counts)


def test_the_feeding_order_names_every_store_tier_once_then_none() -> None:
    assert sorted(FEEDING_ORDER) == sorted(TIERS)
    assert TIER_NAMES == (*FEEDING_ORDER, "none")


def test_each_row_is_fed_by_the_first_tier_present_in_the_feeding_order() -> None:
    # Row k has the tiers from FEEDING_ORDER[k] on, so it is fed by FEEDING_ORDER[k]; the last row has none.
    n = len(FEEDING_ORDER) + 1
    masks = {tier: [row <= k for row in range(n)] for k, tier in enumerate(FEEDING_ORDER)}
    tiers = feeding_tier(_read(masks))
    assert [TIER_NAMES[t] for t in tiers] == [*FEEDING_ORDER, "none"]


def test_a2a_feeds_before_the_user_aggregate() -> None:
    """The measured order: an item-specific value beats the user's mean code."""
    tiers = feeding_tier(_read({"a2a": [True], "agg": [True], "knn": [True]}))
    assert TIER_NAMES[tiers[0]] == "a2a"


def test_marginal_coverage_is_the_step_of_the_cumulative() -> None:
    rng = np.random.default_rng(0)
    masks = {tier: list(rng.random(400) < share) for tier, share in zip(TIERS, (0.4, 0.7, 0.2, 0.5), strict=True)}
    tiers = feeding_tier(_read(masks))
    cumulative, marginal = cumulative_coverage(tiers), marginal_coverage(tiers)
    assert list(cumulative) == list(marginal) == list(FEEDING_ORDER)
    steps = np.diff([0.0, *cumulative.values()])
    assert list(marginal.values()) == pytest.approx(list(steps))
    any_tier = np.logical_or.reduce([np.array(m) for m in masks.values()]).mean()
    assert cumulative[FEEDING_ORDER[-1]] == pytest.approx(any_tier)


def test_an_absent_read_feeds_nothing() -> None:
    assert set(feeding_tier(absent(5, 4)).tolist()) == {TIER_NAMES.index("none")}
    assert marginal_coverage(np.zeros(0, np.int8)) == dict.fromkeys(FEEDING_ORDER, 0.0)
