"""The capacity plan (#45): how much NE the FM calls of an hour buy, from the arms one or more replays ran
(:mod:`solaris.eval.capacity`), and the budget and TTL to run at.

Its rules, declared here once:

- The curve is the SOLARIS VM's NE loss against its selector's full-budget arm (its largest spend at the
  replay's TTL: :func:`~solaris.eval.capacity.full_budgets`; the lowest-NE arm would be chosen by noise),
  paired over the same requests, against FM calls an hour.
- Seeds pool by arm (:attr:`CurvePoint.key`): the mean loss and calls, and the envelope of the seeds' intervals,
  so an arm counts as separated from the full budget only where every seed says so.
- The selector planned is the budget selector where it beats the verifier at equal FM calls (on every seed a
  paired gain above zero at one spend at least, and a measured loss at none); else the verifier.
- The knee is the least spend of that selector whose mean loss against its own full budget is within ``target``.
- A recommendation is made only where an arm of that selector is separated from its full budget: otherwise the
  curve is flat within noise, and the plan says so instead.
"""

from __future__ import annotations

import statistics
from collections.abc import Sequence
from dataclasses import asdict, dataclass
from typing import Any

from solaris.eval.figures import CurvePoint, ReplayReport, SpeculationPoint
from solaris.precompute.params import PrecomputeParams

PLAN_TARGET = 0.001  # the NE loss against its selector's full budget a plan accepts (``solaris plan --target``)
PLAN_FOLDER = "plan"  # where a replay's plan is written, beside its seed-<N> folders
HOURS_A_DAY = 24


class PlanError(ValueError):
    """A replay a plan cannot be made from, named."""


@dataclass(frozen=True)
class PlanArm:
    """One arm pooled over seeds."""

    selector: str
    spend: str
    ttl_hours: int
    min_demand: float
    fm_budget: int | None
    top_fraction: float | None
    fm_calls_per_hour: float
    coverage_pair: float
    hit_rate_ttl: float | None
    ne: float
    ne_loss: float
    ne_loss_ci95: list[float]  # the envelope of the seeds' paired intervals
    seeds: int
    full_budget: bool = False  # the reference of its selector's arms (False throughout: a plan before 2026-12-08)

    @property
    def label(self) -> str:
        floor = f", min_demand {self.min_demand:g}" if self.min_demand else ""
        return f"{self.selector} at {self.spend}'s spend, ttl {self.ttl_hours} h{floor}"

    @property
    def fm_calls_per_day(self) -> float:
        return self.fm_calls_per_hour * HOURS_A_DAY

    @property
    def separated(self) -> bool:
        """Whether its loss against its full budget is beyond its interval on every seed."""
        low, high = self.ne_loss_ci95
        return low > 0 or high < 0


@dataclass(frozen=True)
class SelectorVerdict:
    planned: str  # "budget" or "verifier"
    reason: str
    requested_auc: float | None  # the budget arms' demand model on the pairs they scored (mean; None: no arm)
    valid_auc: float | None  # its validation AUC at the replay's own TTL (mean over seeds), which production's
    # fallback holds against demand_auc_floor
    under_floor: bool | None  # whether production would fall back to the verifier under today's floor


@dataclass(frozen=True)
class OperatingPoint:
    """Where a run's parameters sit against the plan (the defaults, or production's last run)."""

    selector: str
    fm_budget: int
    ttl_hours: int
    past_knee: bool | None  # None: the plan has no recommendation to compare with
    sentence: str


@dataclass(frozen=True)
class Plan:
    world: str
    seeds: list[int]
    commits: list[str]  # the distinct sources the replays ran ("unknown" where not a git checkout)
    target: float
    full_budget: str
    arms: list[PlanArm]
    selector: SelectorVerdict
    knee: PlanArm | None  # the arm recommended: only where the planned selector's curve is separated from noise
    verdict: str
    operating_point: OperatingPoint

    def as_dict(self) -> dict[str, object]:
        knee = _arm_dict(self.knee) if self.knee else None
        return asdict(self) | {"arms": [_arm_dict(a) for a in self.arms], "knee": knee}

    @classmethod
    def from_dict(cls, raw: dict[str, Any]) -> Plan:
        """A plan as :meth:`as_dict` wrote it (``plan.json``); a malformed one is an error naming what is wrong."""
        try:
            knee = raw["knee"]
            return cls(
                **raw
                | {
                    "arms": [_arm_of(a) for a in raw["arms"]],
                    "selector": SelectorVerdict(**raw["selector"]),
                    "knee": _arm_of(knee) if knee else None,
                    "operating_point": OperatingPoint(**raw["operating_point"]),
                }
            )
        except (KeyError, TypeError) as exc:
            raise PlanError(f"not a plan SOLARIS wrote: {type(exc).__name__}: {exc}") from None


_DERIVED = ("label", "fm_calls_per_day")  # PlanArm's properties, written for readers of plan.json


def _arm_dict(arm: PlanArm) -> dict[str, object]:
    return asdict(arm) | {name: getattr(arm, name) for name in _DERIVED}


def _arm_of(raw: dict[str, Any]) -> PlanArm:
    return PlanArm(**{k: v for k, v in raw.items() if k not in _DERIVED})


def make_plan(
    reports: Sequence[ReplayReport], target: float = PLAN_TARGET, today: PrecomputeParams | None = None
) -> Plan:
    """The plan of one world's replays (one per seed); refuses reports without arms or of several worlds."""
    _check(reports, target)
    arms = _pooled(reports)
    today = today or PrecomputeParams()
    selector = _selector(reports, today.demand_auc_floor)
    full = next((a for a in arms if a.full_budget and a.selector == selector.planned), None)
    series = sorted((a for a in arms if a.selector == selector.planned), key=lambda a: (a.fm_calls_per_hour, a.ne_loss))
    knee, verdict = _knee(series, selector.planned, target)
    return Plan(
        world=reports[0].replayed_world,
        seeds=[r.seed for r in reports],
        commits=sorted({r.commit or "unknown" for r in reports}),
        target=target,
        full_budget=full.label if full else f"none: no arm of the {selector.planned} selector ran",
        arms=arms,
        selector=selector,
        knee=knee,
        verdict=verdict,
        operating_point=operating_point(today, knee),
    )


def _knee(series: list[PlanArm], selector: str, target: float) -> tuple[PlanArm | None, str]:
    """The arm to recommend from the planned selector's arms (by FM calls), and the plan's verdict."""
    if not series:
        return None, f"no arm of the {selector} selector ran: nothing to recommend"
    if not any(a.separated for a in series):
        low, high = series[0].fm_calls_per_hour, series[-1].fm_calls_per_hour
        return None, (
            f"flat within noise: from {low:,.0f} to {high:,.0f} FM calls an hour the {selector} selector's "
            "NE differs from its full budget's by less than its intervals on some seed; no spend is recommended"
        )
    knee = next((a for a in series if a.ne_loss <= target), None)
    if knee is None:
        return None, f"no {selector} arm is within {target:g} NE of its full budget: spend more than the grid ran"
    return knee, (
        f"the knee: {knee.label}, {knee.fm_calls_per_day:,.0f} FM calls a day, NE loss {knee.ne_loss:+.4f} "
        f"[{knee.ne_loss_ci95[0]:+.4f}, {knee.ne_loss_ci95[1]:+.4f}] against its full budget (target {target:g})"
    )


def operating_point(params: PrecomputeParams, knee: PlanArm | None) -> OperatingPoint:
    """Whether ``params`` spend past the plan's knee: more FM calls an hour for no NE the plan can measure."""
    if knee is None:
        return OperatingPoint(params.selector, params.fm_budget, params.ttl_hours, None, "no recommendation to compare")
    if params.selector != knee.selector:
        past, sentence = None, f"runs the {params.selector} selector; the plan recommends the {knee.selector}"
    elif knee.fm_budget is None:
        past, sentence = None, "the verifier's spend is its top_fraction, not a budget"
    else:
        past = params.fm_budget > knee.fm_budget
        sentence = (
            f"fm_budget {params.fm_budget:,} is {'past' if past else 'at or below'} the knee's {knee.fm_budget:,}"
        )
    if knee.ttl_hours != params.ttl_hours:
        sentence += f"; ttl_hours {params.ttl_hours} where the knee's is {knee.ttl_hours}"
    return OperatingPoint(params.selector, params.fm_budget, params.ttl_hours, past, sentence)


def _check(reports: Sequence[ReplayReport], target: float) -> None:
    if not reports:
        raise PlanError("no replay reports to plan from")
    if target < 0:
        raise PlanError(f"the target NE loss must be at least 0, got {target}")
    worlds = sorted({r.replayed_world for r in reports})
    if len(worlds) > 1:
        raise PlanError(f"a plan is of one world; these replays are of {', '.join(worlds)}")
    if bare := [r.seed for r in reports if not r.curve]:
        raise PlanError(
            f"the replay of seed(s) {', '.join(map(str, bare))} ran no arms to plan from (it ran with --no-sweep "
            "and --no-speculation, or before plans): replay again without them"
        )
    if older := [r.seed for r in reports if not any(p.full_budget for p in r.curve)]:
        raise PlanError(
            f"the replay of seed(s) {', '.join(map(str, older))} measured its arms against one full budget for both "
            "selectors (a replay before 2026-12-08), not each against its own selector's: replay again"
        )
    keys = [{p.key for p in r.curve} for r in reports]
    if any(k != keys[0] for k in keys):
        raise PlanError(
            "the seeds' replays ran different arms (other sweep, selector or TTL options); replay them alike"
        )


def _pooled(reports: Sequence[ReplayReport]) -> list[PlanArm]:
    by_key: dict[tuple[str, str, int, float], list[CurvePoint]] = {}
    for report in reports:
        for point in report.curve:
            by_key.setdefault(point.key, []).append(point)
    return [_pool(points) for points in by_key.values()]


def _pool(points: list[CurvePoint]) -> PlanArm:
    first = points[0]
    budgets = [p.fm_budget for p in points if p.fm_budget is not None]
    hits = [p.hit_rate_ttl for p in points if p.hit_rate_ttl is not None]
    return PlanArm(
        selector=first.selector,
        spend=first.spend,
        ttl_hours=first.ttl_hours,
        min_demand=first.min_demand,
        fm_budget=round(statistics.fmean(budgets)) if budgets else None,
        top_fraction=first.top_fraction,
        fm_calls_per_hour=statistics.fmean(p.fm_calls_per_hour for p in points),
        coverage_pair=statistics.fmean(p.coverage_pair for p in points),
        hit_rate_ttl=statistics.fmean(hits) if hits else None,
        ne=statistics.fmean(p.ne for p in points),
        ne_loss=statistics.fmean(p.ne_loss for p in points),
        ne_loss_ci95=[min(p.ne_loss_ci95[0] for p in points), max(p.ne_loss_ci95[1] for p in points)],
        seeds=len(points),
        full_budget=first.full_budget,
    )


def _selector(reports: Sequence[ReplayReport], floor: float) -> SelectorVerdict:
    """The selector planned and why, with the demand model's AUCs: as it ranked the pairs its arms scored, and
    on its validation hours against production's ``floor``."""
    planned, reason = _planned_selector(reports)
    requested = [p.requested_auc for r in reports for p in r.speculation if p.selector == "budget" and p.requested_auc]
    valid = [auc for r in reports if (auc := r.demand_valid_auc.get(str(_ttl_hours(r)))) is not None]
    valid_auc = statistics.fmean(valid) if valid else None
    under = None if valid_auc is None else valid_auc < floor
    return SelectorVerdict(planned, reason, statistics.fmean(requested) if requested else None, valid_auc, under)


def _planned_selector(reports: Sequence[ReplayReport]) -> tuple[str, str]:
    """The budget selector where it beats the verifier at equal FM calls on every seed, else the verifier."""
    equal = [[p for p in r.speculation if _at_equal_calls(p, r.speculation)] for r in reports]
    if not all(equal):
        return "verifier", "the selectors were not compared at equal FM calls on every seed"
    lows = [[p.ne_gain_vs_verifier_ci95[0] for p in points] for points in equal]
    highs = [[p.ne_gain_vs_verifier_ci95[1] for p in points] for points in equal]
    if any(h < 0 for seed in highs for h in seed):
        return "verifier", "the budget selector is a measured loss against the verifier at equal FM calls"
    if all(any(low > 0 for low in seed) for seed in lows):
        return "budget", "the budget selector beats the verifier at equal FM calls on every seed"
    return "verifier", "the budget selector does not beat the verifier at equal FM calls on every seed"


def _ttl_hours(report: ReplayReport) -> int:
    """The TTL the replay's own arms ran at."""
    return int(report.protocol.get("precompute", {}).get("ttl_hours", PrecomputeParams.ttl_hours))


def _at_equal_calls(point: SpeculationPoint, points: list[SpeculationPoint]) -> bool:
    """A budget arm given a verifier arm's spend (not the third of it), with its paired gain."""
    verifier_budgets = {p.fm_budget for p in points if p.selector == "verifier"}
    return (
        point.selector == "budget"
        and point.fm_budget in verifier_budgets
        and point.ne_gain_vs_verifier_ci95 is not None
    )
