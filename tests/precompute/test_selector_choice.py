"""Which selector an hour runs: the budget selector falls back to the verifier under its demand model's floor."""

from __future__ import annotations

import pytest

from solaris.precompute.params import DEMAND_AUC_FLOOR, PrecomputeParams
from solaris.precompute.selector_choice import choose_selector
from solaris.tracking.registry import DemandChampion

BUDGET = PrecomputeParams(selector="budget")


def test_the_verifier_asked_for_runs_without_a_demand_model() -> None:
    choice = choose_selector(PrecomputeParams(selector="verifier"), None)
    assert (choice.selector, choice.demand_version, choice.reason) == ("verifier", None, "asked for")


@pytest.mark.parametrize(
    ("auc", "selector", "version", "reason"),
    [
        (DEMAND_AUC_FLOOR, "budget", "7", "validation AUC 0.720 >= 0.72"),
        (0.9, "budget", "7", "validation AUC 0.900 >= 0.72"),
        (0.65, "verifier", None, "demand model v7's validation AUC 0.650 is under demand_auc_floor 0.72"),
        (None, "budget", "7", "demand model v7 has no validation AUC"),
    ],
)
def test_the_budget_selector_runs_only_at_or_over_its_floor(
    auc: float | None, selector: str, version: str | None, reason: str
) -> None:
    choice = choose_selector(BUDGET, DemandChampion("7", auc))
    assert (choice.selector, choice.demand_version) == (selector, version)
    assert reason in choice.reason


def test_a_floor_of_zero_never_falls_back() -> None:
    assert (
        choose_selector(PrecomputeParams(selector="budget", demand_auc_floor=0.0), DemandChampion("7", 0.5)).selector
        == "budget"
    )


def test_the_floor_is_a_bounded_knob() -> None:
    with pytest.raises(ValueError, match=r"demand_auc_floor must be in \[0, 1\]"):
        PrecomputeParams(demand_auc_floor=1.5)
