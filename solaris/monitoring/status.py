"""The page's status line: healthy, degraded or failing, each with its reasons, read off the health report.

Every threshold is declared once, in :data:`THRESHOLDS`, and the page and the JSON show them as declared. A
check with nothing to measure (no run with that figure yet, no ranker reachable) reads "not measured" and
counts as healthy, except the run age: no finished run at all is itself a reason.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TYPE_CHECKING, Literal

from solaris.precompute.run_files import FM_BUDGET_COUNT
from solaris.tracking.promotion import MAX_SHADOW_COVERAGE_DROP

if TYPE_CHECKING:
    from solaris.monitoring.ranker_state import RankerState
    from solaris.monitoring.report import CoveragePoint, HealthReport, RunHealth

Level = Literal["healthy", "degraded", "failing"]
HEALTHY, DEGRADED, FAILING = "healthy", "degraded", "failing"
LEVELS: tuple[Level, ...] = (HEALTHY, DEGRADED, FAILING)  # worst last
HOUR = timedelta(hours=1)
DAY = timedelta(days=1)
MIN_DAY_HOURS = 3  # hours of the last day a coverage comparison needs before it means anything
# The runs that count as the schedule keeping up: a skipped run found nothing to do, which is no failure.
FINISHED = ("succeeded", "skipped")


@dataclass(frozen=True)
class Threshold:
    """Where a figure turns degraded and failing; ``worse``: whether above or below the limit is bad."""

    name: str
    measures: str
    unit: str
    degraded: float | None
    failing: float | None
    worse: Literal["above", "below"]

    def level(self, value: float) -> Level:
        def past(limit: float | None) -> bool:
            return limit is not None and (value > limit if self.worse == "above" else value < limit)

        return FAILING if past(self.failing) else DEGRADED if past(self.degraded) else HEALTHY


RUN_AGE = Threshold(
    "run_age",
    "hours since the end of the hour the last finished run precomputed (the schedule is hourly)",
    "h",
    degraded=2.0,
    failing=6.0,
    worse="above",
)
COVERAGE_VS_DAY = Threshold(
    "coverage_vs_day",
    "all-tier coverage of the latest hour / its mean over the day before",
    "ratio",
    degraded=0.8,
    failing=0.5,
    worse="below",
)
HIT_VS_CEILING = Threshold(
    "hit_vs_ceiling",
    "hit while fresh / its ceiling (what knowing every request would reach), latest run",
    "ratio",
    degraded=0.4,
    failing=None,
    worse="below",
)
FM_CALLS_VS_BUDGET = Threshold(
    "fm_calls_vs_budget",
    "pairs the FM embedded for the selector / fm_budget, latest run",
    "ratio",
    degraded=None,
    failing=1.0,
    worse="above",
)
RANKER_P99 = Threshold(
    "ranker_p99", "the ranker's p99 latency per /rank", "ms", degraded=50.0, failing=250.0, worse="above"
)
DEGRADED_VMS = Threshold(
    "degraded_vms",
    "VMs the ranker serves degraded (every candidate tier none)",
    "VMs",
    degraded=0.0,
    failing=None,
    worse="above",
)
SHADOW_DROP = Threshold(
    "shadow_drop",
    "a pending challenger's all-tier coverage in shadow below the champion's (its gate's limit)",
    "share",
    degraded=MAX_SHADOW_COVERAGE_DROP,
    failing=None,
    worse="above",
)
THRESHOLDS = (RUN_AGE, COVERAGE_VS_DAY, HIT_VS_CEILING, FM_CALLS_VS_BUDGET, RANKER_P99, DEGRADED_VMS, SHADOW_DROP)


@dataclass(frozen=True)
class Reading:
    """One check's figure (None: not measured), its level and what the page says about it."""

    check: str
    value: float | None
    level: Level
    message: str


@dataclass(frozen=True)
class Status:
    level: Level
    readings: list[Reading]

    @property
    def reasons(self) -> list[Reading]:
        """The readings that made the level: every one not healthy, worst first."""
        bad = [r for r in self.readings if r.level != HEALTHY]
        return sorted(bad, key=lambda r: -LEVELS.index(r.level))


def health_status(report: HealthReport) -> Status:
    """The report's level: the worst of its readings; a source it could not read or an alert on the latest run
    (failed, or stale) is failing."""
    readings = [Reading("source", None, FAILING, f"{p.source} unavailable: {p.message}") for p in report.problems]
    readings += [Reading("latest_run", None, FAILING, a.message) for a in report.alerts]
    readings += [
        run_age(report.history, report.at),
        coverage_vs_day(report.coverage),
        hit_vs_ceiling(report.history),
        fm_calls_vs_budget(report.history),
        *ranker_readings(report.ranker),
        shadow_drop(report.history),
    ]
    worst = max((LEVELS.index(r.level) for r in readings), default=0)
    return Status(LEVELS[worst], readings)


def run_age(runs: Sequence[RunHealth], t: datetime) -> Reading:
    """Hours from the end of the latest finished run's hour to ``t``: on schedule it stays under one hour plus
    the run's own minutes."""
    finished = [r.record for r in runs if r.record.status in FINISHED]
    if not finished:
        return Reading(RUN_AGE.name, None, DEGRADED, "no precompute run has finished yet")
    last = max(finished, key=lambda r: r.interval_end)
    age = (t - last.interval_end) / HOUR
    message = f"the last finished run precomputed the hour ending {last.interval_end:%Y-%m-%d %H:%M}, {age:.1f} h ago"
    return _judged(RUN_AGE, age, message)


def coverage_vs_day(points: Sequence[CoveragePoint]) -> Reading:
    """The latest hour's all-tier coverage against its mean over the day before it."""
    if not points:
        return _unmeasured(COVERAGE_VS_DAY, "no coverage measured")
    latest = points[-1]
    day = [p.shares["any"] for p in points if latest.hour - DAY <= p.hour < latest.hour]
    mean = sum(day) / len(day) if day else 0.0
    if len(day) < MIN_DAY_HOURS or mean <= 0:
        return _unmeasured(COVERAGE_VS_DAY, f"{len(day)} hour(s) of the day before measured, {MIN_DAY_HOURS} needed")
    ratio = latest.shares["any"] / mean
    message = f"all-tier coverage {latest.shares['any']:.1%} at {latest.hour:%H}:00, the day before's mean {mean:.1%}"
    return _judged(COVERAGE_VS_DAY, ratio, message)


def hit_vs_ceiling(runs: Sequence[RunHealth]) -> Reading:
    for run in runs:
        hit, ceiling = run.figures.get("hit_rate_ttl"), run.figures.get("hit_ceiling_ttl")
        if hit is not None and ceiling:
            message = f"hit while fresh {hit:.1%} against a ceiling of {ceiling:.1%} (run {run.record.run_id})"
            return _judged(HIT_VS_CEILING, hit / ceiling, message)
    return _unmeasured(HIT_VS_CEILING, "no run measured hit while fresh and its ceiling")


def fm_calls_vs_budget(runs: Sequence[RunHealth]) -> Reading:
    for run in runs:
        counts = run.record.counts
        if run.record.status == "succeeded" and counts.get(FM_BUDGET_COUNT):
            calls, budget = counts.get("selected", 0), counts[FM_BUDGET_COUNT]
            message = (
                f"{calls:,} FM calls for the selector's pairs against fm_budget {budget:,} (run {run.record.run_id})"
            )
            return _judged(FM_CALLS_VS_BUDGET, calls / budget, message)
    return _unmeasured(FM_CALLS_VS_BUDGET, "no finished run of the budget selector recorded its fm_budget")


def ranker_readings(ranker: RankerState | None) -> list[Reading]:
    """The ranker's p99 and its degraded VMs, as :mod:`.ranker_state` read them."""
    if ranker is None:
        why = "no ranker reachable and no live load recorded"
        return [_unmeasured(RANKER_P99, why), _unmeasured(DEGRADED_VMS, why)]
    if ranker.p99_ms is None:
        p99 = _unmeasured(RANKER_P99, f"no /rank request yet ({ranker.source})")
    else:
        p99 = _judged(RANKER_P99, ranker.p99_ms, f"ranker p99 {ranker.p99_ms:.1f} ms ({ranker.source})")
    if ranker.degraded is None:
        return [p99, _unmeasured(DEGRADED_VMS, f"not known from {ranker.source}")]
    named = ", ".join(f"{vm} ({why})" for vm, why in sorted(ranker.degraded.items())) or "none"
    degraded = _judged(DEGRADED_VMS, len(ranker.degraded), f"VMs served degraded: {named} ({ranker.source})")
    return [p99, degraded]


def shadow_drop(runs: Sequence[RunHealth]) -> Reading:
    """Only while a challenger is written in shadow: the latest run that measured its coverage."""
    for run in runs:
        shadow, champion = run.figures.get("shadow_coverage_any"), run.figures.get("coverage_any")
        if shadow is not None and champion is not None:
            message = (
                f"the challenger's shadow coverage {shadow:.1%} against the champion's {champion:.1%} "
                f"(run {run.record.run_id}); more than {SHADOW_DROP.degraded:.0%} below, its gate refuses it"
            )
            return _judged(SHADOW_DROP, champion - shadow, message)
    return _unmeasured(SHADOW_DROP, "no challenger in shadow")


def _judged(threshold: Threshold, value: float, message: str) -> Reading:
    return Reading(threshold.name, value, threshold.level(value), message)


def _unmeasured(threshold: Threshold, why: str) -> Reading:
    return Reading(threshold.name, None, HEALTHY, f"not measured: {why}")
