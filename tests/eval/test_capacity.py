"""The capacity plan's grid as declared: which budget arms a replay runs, each one's own store folder, and each
selector's full-budget arm."""

from __future__ import annotations

from solaris.eval.capacity import budget_grid, full_budgets, verifier_arms
from solaris.eval.speculation import Spend

PARAMS = {"selector": "verifier", "top_fraction": 0.2, "ttl_hours": 4}
SPENDS = [Spend("top 0.1", 700, {}), Spend("top 0.4", 1_300, {}), Spend("top 0.2 / 3", 300, {})]


def test_every_spend_runs_at_every_ttl_and_the_largest_at_every_floor() -> None:
    grid = budget_grid(SPENDS, [8, 2], [0.0, 0.2, 0.05], PARAMS)
    cells = {(a.spend, a.params["ttl_hours"], a.params.get("min_demand", 0.0)) for a in grid}
    ttls = {(s.name, t, 0.0) for s in SPENDS for t in (2, 4, 8)}
    assert cells == ttls | {("top 0.4", 4, 0.05), ("top 0.4", 4, 0.2)}
    assert all(a.selector == "budget" and a.params["selector"] == "budget" for a in grid)
    assert {a.params["fm_budget"] for a in grid if a.spend == "top 0.4"} == {1_300}


def test_each_arm_has_its_own_store_folder_and_the_comparisons_arms_keep_theirs() -> None:
    grid = budget_grid(SPENDS, [8], [0.2], PARAMS)
    names = [a.name for a in grid]
    assert len(set(names)) == len(names)  # a fresh store each: no two arms share a folder
    assert {"budget-700", "budget-1300", "budget-300"} <= set(names)  # the selector comparison's, read not rerun
    assert {"budget-700-ttl8", "budget-1300-floor0.2"} <= set(names)


def test_no_spend_no_budget_arm_and_the_verifier_arms_once_a_fraction() -> None:
    assert budget_grid([], [8], [0.2], PARAMS) == []
    arms = verifier_arms([0.1, 0.2, 0.1, 0.05], lambda f: PARAMS | {"top_fraction": f})
    assert [(a.name, a.params["top_fraction"]) for a in arms] == [
        ("sweep-0.05", 0.05),
        ("sweep-0.1", 0.1),
        ("sweep-0.2", 0.2),
    ]


def test_each_selectors_full_budget_is_its_largest_spend_at_the_replays_ttl_without_a_floor() -> None:
    # A ttl 2 h arm and a floor at the largest budget are not the reference, whatever they spend.
    declared = budget_grid(SPENDS, [2], [0.2], PARAMS) + verifier_arms(
        [0.4, 0.1], lambda f: PARAMS | {"top_fraction": f}
    )
    references = full_budgets(declared, ttl_hours=4)
    assert {s: a.name for s, a in references.items()} == {"budget": "budget-1300", "verifier": "sweep-0.4"}
