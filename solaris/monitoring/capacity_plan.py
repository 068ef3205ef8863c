"""The last capacity plan on the health page (#45): its curve, with the fm_budget and ttl_hours the precompute
runs at today set against its knee, so that an operator sees when the spend is past it.

The plan shown is production's world's (``replay/<world>/plan``, the folder a replay of that preset or world
writes), else the newest any replay wrote, with a line that it is another world's; today's knobs are the
latest finished run's (its counts hold its ``ttl_hours``, and a budget run's ``fm_budget``), the knobs'
defaults before any run recorded them.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from pathlib import Path

from solaris.eval.plan import PLAN_FOLDER, OperatingPoint, Plan, PlanError, operating_point
from solaris.monitoring.charts import Chart, CurveSeries, curve_chart
from solaris.monitoring.report import RunHealth
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.run_files import FM_BUDGET_COUNT, TTL_HOURS_COUNT

PLAN_JSON = f"{PLAN_FOLDER}/plan.json"
PLAN_COLOURS = 6  # the page's style.html colours plan-0 .. plan-5


@dataclass(frozen=True)
class PlanOnPage:
    path: str
    plan: Plan | None  # None: the file could not be read (``problem`` says why)
    today: OperatingPoint | None
    today_from: str  # the run whose counts gave today's knobs, or that they are the defaults
    problem: str | None = None
    other_world: str | None = None  # where the plan is not of the world production serves: that world


def plan_path(data_dir: Path, world: str) -> tuple[Path, str | None] | None:
    """Production's world's plan, else the newest of any replay's and production's world beside it."""
    own = data_dir / "replay" / world / PLAN_JSON
    if own.exists():
        return own, None
    found = sorted((data_dir / "replay").glob(f"*/{PLAN_JSON}"), key=lambda p: p.stat().st_mtime)
    return (found[-1], world) if found else None


def plan_on_page(data_dir: Path, world: str, history: Sequence[RunHealth]) -> PlanOnPage | None:
    """The plan of production's ``world`` (else the newest) and today's knobs on it; None where no replay has
    written a plan."""
    if (found := plan_path(data_dir, world)) is None:
        return None
    path, serving = found
    params, source = todays_params(history)
    try:
        plan = Plan.from_dict(json.loads(path.read_text()))
    except (OSError, ValueError) as exc:  # PlanError and JSON's errors are ValueErrors
        why = str(exc) if isinstance(exc, PlanError) else f"{type(exc).__name__}: {exc}"
        return PlanOnPage(str(path), None, None, source, why)
    return PlanOnPage(str(path), plan, operating_point(params, plan.knee), source, other_world=serving)


def todays_params(history: Sequence[RunHealth]) -> tuple[PrecomputeParams, str]:
    """The knobs of the latest finished run that recorded them (``history`` is newest first)."""
    for run in history:
        counts = run.record.counts
        if run.record.status == "succeeded" and TTL_HOURS_COUNT in counts:
            budget = counts.get(FM_BUDGET_COUNT)
            selector = "budget" if budget is not None else "verifier"
            params = PrecomputeParams(
                selector=selector, fm_budget=budget or PrecomputeParams.fm_budget, ttl_hours=counts[TTL_HOURS_COUNT]
            )
            return params, f"run {run.record.run_id}"
    return PrecomputeParams(), "the knobs' defaults (no finished run recorded its own)"


def plan_chart(found: PlanOnPage) -> Chart:
    """NE loss against FM calls an hour, a line per selector and TTL (and floor), the knee as a point, and
    today's fm_budget as a dashed line where the budget selector runs."""
    plan = found.plan
    if plan is None:
        return curve_chart("plan", "Capacity plan", "NE loss", "FM calls an hour", [], [], _loss)
    lines: dict[tuple[str, int, float], list[tuple[float, float]]] = {}
    for arm in plan.arms:
        lines.setdefault((arm.selector, arm.ttl_hours, arm.min_demand), []).append((arm.fm_calls_per_hour, arm.ne_loss))
    series = [
        CurveSeries(
            f"{selector}, ttl {ttl} h" + (f", floor {floor:g}" if floor else ""), f"plan-{i % PLAN_COLOURS}", points
        )
        for i, ((selector, ttl, floor), points) in enumerate(sorted(lines.items()))
    ]
    if (knee := plan.knee) is not None:
        series.append(CurveSeries("knee", "knee", [(knee.fm_calls_per_hour, knee.ne_loss)]))
    today = found.today
    marks = [("today's fm_budget", "limit", float(today.fm_budget))] if today and today.selector == "budget" else []
    title = f"Capacity plan of world {plan.world}: NE loss against its selector's full budget"
    return curve_chart("plan", title, "NE loss", "FM calls an hour (log)", series, marks, _loss)


def _loss(value: float) -> str:
    return f"{value:+.4f}" if value else "0"
