"""The budget selector: never over budget, re-queue included; deterministic; bad budgets refused by name."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from solaris.models.demand import DemandConfig
from solaris.precompute.budget import select_within_budget
from solaris.precompute.fm_pool import REQUEUE
from solaris.precompute.params import SELECTORS, PrecomputeParams
from solaris.precompute.selectors import SELECTORS as IMPLEMENTED


def pool(n: int, seed: int = 0) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    sources = rng.choice(["recent", "covisit", "popular", REQUEUE], n)
    return pd.DataFrame(
        {
            "user_id": rng.integers(0, 50, n),
            "item_id": np.arange(n),
            "source": pd.Categorical(sources),
            "score": rng.random(n).round(2),  # ties on purpose
            "demand": rng.random(n),
        }
    )


@pytest.mark.parametrize("budget", [1, 7, 100, 1000])
def test_budget_is_never_exceeded_and_requeue_competes(budget: int) -> None:
    scored = pool(300)
    chosen = select_within_budget(scored, budget, 0.0)
    assert len(chosen) == min(budget, len(scored))
    assert not chosen["forced"].any()
    # the best scores are taken: nothing left out scores above anything taken
    left = scored[~scored["item_id"].isin(chosen["item_id"])]
    assert left.empty or left["score"].max() <= chosen["score"].min()
    requeued = scored[scored["source"] == REQUEUE]
    if budget < len(scored):  # re-queued pairs below the cut stay out: they compete, they are not forced
        assert not requeued[requeued["score"] < chosen["score"].min()]["item_id"].isin(chosen["item_id"]).any()


def test_ties_break_by_user_then_item_whatever_the_row_order() -> None:
    scored = pool(300)
    shuffled = scored.sample(frac=1.0, random_state=1)
    a, b = select_within_budget(scored, 40, 0.0), select_within_budget(shuffled, 40, 0.0)
    pd.testing.assert_frame_equal(a.reset_index(drop=True), b.reset_index(drop=True))


@pytest.mark.parametrize("budget", [10, 1000])
def test_no_pair_below_min_demand_is_chosen_even_with_budget_left(budget: int) -> None:
    scored = pool(300)
    chosen = select_within_budget(scored, budget, 0.6)
    worth = scored[scored["demand"] >= 0.6]
    assert len(chosen) == min(budget, len(worth)) and (chosen["demand"] >= 0.6).all()
    # above the floor it is the budget cut as before: the best scores of the pairs worth a call
    pd.testing.assert_frame_equal(chosen, select_within_budget(worth, budget, 0.0))
    assert select_within_budget(scored, budget, 1.0).empty


@pytest.mark.parametrize("bad", [-0.1, 1.5, float("nan"), "0.2"])
def test_bad_min_demand_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match="min_demand"):
        PrecomputeParams.from_mapping({"min_demand": bad})


@pytest.mark.parametrize("bad", [0, -5, 2.5, "100", True])
def test_bad_fm_budget_is_refused_by_name(bad: object) -> None:
    with pytest.raises(ValueError, match="fm_budget"):
        PrecomputeParams.from_mapping({"fm_budget": bad})


def test_unknown_selector_is_refused_and_every_declared_one_is_implemented() -> None:
    with pytest.raises(ValueError, match="selector 'oracle' is not one of budget, verifier"):
        PrecomputeParams.from_mapping({"selector": "oracle"})
    assert set(SELECTORS) == set(IMPLEMENTED)


def test_cohort_gain_weighs_pairs_without_an_aggregate() -> None:
    config = DemandConfig(("x",), gain_aggregate=0.25, gain_no_aggregate=1.0)
    np.testing.assert_array_equal(config.gain(np.array([True, False])), [0.25, 1.0])


def test_tier_columns_name_the_pair_and_aggregate_blocks() -> None:
    from solaris.models.vm import VMConfig, tier_columns

    columns = VMConfig(variant="solaris", code_dim=4).columns()
    for tier in ("pair", "agg", "knn"):
        assert columns[tier_columns(4, tier)] == (*(f"{tier}_{j}" for j in range(4)), f"{tier}_flag")
