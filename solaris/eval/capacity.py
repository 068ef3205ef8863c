"""The capacity plan's arms (#45): every arm a replay runs at some spend, plus the budget selector over a grid of
spends x TTLs, each on a fresh store over the same served hours (:class:`~solaris.eval.arms.Arms`), gathered
into the curve a plan reads (:class:`~solaris.eval.figures.CurvePoint`).

The spends are the selector comparison's (:class:`~solaris.eval.speculation.Spend`: what each verifier arm
spent, and a third of the default's), so the grid adds only the other TTLs, and at the largest spend each
``min_demand`` floor (a floor spends less than its budget where few pairs are likely enough: another way down
the curve); an arm already run (the sweep's verifier arms, the comparison's budget arms) is read, not run again.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from solaris.eval.arms import Arms, mean_coverage, pooled_efficiency
from solaris.eval.figures import CurvePoint
from solaris.eval.speculation import Spend, budget_params


@dataclass(frozen=True)
class CurveArm:
    """An arm the curve holds: what it is called across seeds and the precompute parameters it runs."""

    name: str  # its fresh store's folder
    selector: str
    spend: str
    params: dict[str, Any]


def verifier_arms(fractions: list[float], params_of: Callable[[float], dict[str, Any]]) -> list[CurveArm]:
    """The verifier at each top_fraction (the sweep's and the comparison's arms)."""
    return [CurveArm(f"sweep-{f:g}", "verifier", f"top {f:g}", params_of(f)) for f in sorted(set(fractions))]


def budget_grid(spends: list[Spend], ttls: list[int], floors: list[float], params: dict[str, Any]) -> list[CurveArm]:
    """The budget selector at every spend and TTL (the default TTL's arms are the selector comparison's), and
    at the largest spend and the default TTL with each floor."""
    ttl = params["ttl_hours"]
    grid = [
        CurveArm(_name(spend, at, 0.0, ttl), "budget", spend.name, budget_params(params, spend) | {"ttl_hours": at})
        for spend in spends
        for at in sorted({ttl, *ttls})
    ]
    if not spends:
        return grid
    largest = max(spends, key=lambda s: s.fm_budget)
    return grid + [
        CurveArm(
            _name(largest, ttl, floor, ttl),
            "budget",
            largest.name,
            budget_params(params, largest) | {"min_demand": floor},
        )
        for floor in sorted(set(floors) - {0.0})
    ]


def _name(spend: Spend, ttl: int, floor: float, default_ttl: int) -> str:
    """The arm's store folder: the comparison's name for its own arms."""
    return (
        f"budget-{spend.fm_budget}"
        + (f"-ttl{ttl}" if ttl != default_ttl else "")
        + (f"-floor{floor:g}" if floor else "")
    )


@dataclass
class DemandByTTL:
    """The demand model the budget arms pin predicts requests within one TTL (a run refuses one trained for
    another), so before the budget arms of another TTL one is trained for it and made the arms' champion."""

    ttl_hours: int  # what the champion predicts now
    train_for: Callable[[int], None]

    def at(self, ttl_hours: int) -> None:
        if ttl_hours != self.ttl_hours:
            self.train_for(ttl_hours)
            self.ttl_hours = ttl_hours


def full_budgets(declared: list[CurveArm], ttl_hours: int) -> dict[str, CurveArm]:
    """Each selector's full-budget arm, the reference of its arms' NE loss: its largest spend at the replay's
    TTL and no floor. One per selector: against the verifier's, a budget selector that beats the verifier
    put its knee at a third of the spend of an arm 0.003 NE better (the default world, 2026-12-08). Declared,
    not measured: the arms given one budget spend it alike, so the most calls would be a tie broken by noise."""
    plain = [a for a in declared if a.params["ttl_hours"] == ttl_hours and not a.params.get("min_demand")]
    return {
        selector: max((a for a in plain if a.selector == selector), key=_spend)
        for selector in sorted({a.selector for a in plain})
    }


def _spend(arm: CurveArm) -> float:
    return float(arm.params["fm_budget"] if arm.selector == "budget" else arm.params["top_fraction"])


def curve(arms: Arms, declared: list[CurveArm], demand: DemandByTTL) -> list[CurvePoint]:
    """Every declared arm (run now where it has not run; the budget arms a TTL at a time, the demand model's
    first), its NE paired against its selector's full-budget arm's."""
    now, ran = demand.ttl_hours, {}
    references = full_budgets(declared, now)
    for arm in sorted(declared, key=lambda a: (a.params["ttl_hours"] != now, a.params["ttl_hours"])):
        if arm.selector == "budget":
            demand.at(int(arm.params["ttl_hours"]))
        ran[arm.name] = arms.run(arm.name, arm.params)
    runs = [(arm, *ran[arm.name]) for arm in declared]
    calls = [sum(f.fm_calls for f in run.figures) / len(run.figures) for _, run, _ in runs]
    points = []
    for (arm, run, scored), per_hour in zip(runs, calls, strict=True):
        full = references[arm.selector]
        gain, (low, high) = arms.ne_gain(full.params, arm.params)
        points.append(
            CurvePoint(
                selector=arm.selector,
                spend=arm.spend,
                ttl_hours=int(arm.params["ttl_hours"]),
                min_demand=float(arm.params.get("min_demand", 0.0)),
                fm_budget=arm.params.get("fm_budget") if arm.selector == "budget" else None,
                top_fraction=arm.params.get("top_fraction") if arm.selector == "verifier" else None,
                fm_calls_per_hour=per_hour,
                coverage_pair=mean_coverage(run.figures)["pair"],
                hit_rate_ttl=pooled_efficiency(run.figures)["hit_rate_ttl"],
                ne=scored.ne,
                ne_ci95=list(scored.ne_ci95 or [scored.ne, scored.ne]),
                ne_loss=0.0 - gain,  # 0.0 - x: the full-budget arm's own 0 is not printed as -0
                ne_loss_ci95=[0.0 - high, 0.0 - low],
                full_budget=arm is full,
            )
        )
    return points
