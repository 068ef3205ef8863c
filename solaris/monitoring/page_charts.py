"""The four charts of the SOLARIS page, as series read off the health report: coverage by tier, FM calls per
hour against the budget, hit while fresh against its ceiling, and the ranker's p50 / p99.

A run's quality figures describe the hour before it (its coverage step measures the hour just served); its FM
calls are made for its own hour. The JSON carries the same series, the page draws them.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime, timedelta

from solaris.monitoring.charts import Chart, Series, count, hourly_chart, milliseconds, percent
from solaris.monitoring.report import COVERAGE_TIERS, HealthReport, RunHealth
from solaris.precompute.run_files import FM_BUDGET_COUNT

HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class ChartSpec:
    key: str
    title: str
    unit: str
    label: Callable[[float], str]
    series: list[Series]


def chart_specs(report: HealthReport) -> list[ChartSpec]:
    runs = _one_per_hour(report.history)
    measured = {r.record.interval_start - HOUR: r.figures for r in runs}
    counts = {r.record.interval_start: r.record.counts for r in runs if r.record.status == "succeeded"}
    coverage = [
        Series(tier, f"tier-{tier}", {p.hour: p.shares[tier] for p in report.coverage}) for tier in COVERAGE_TIERS
    ]
    calls = [
        Series("FM calls (pairs selected)", "calls", _values(counts, "selected")),
        Series("fm_budget", "limit", _values(counts, FM_BUDGET_COUNT), dashed=True),
    ]
    hits = [
        Series("hit while fresh", "calls", _values(measured, "hit_rate_ttl")),
        Series("ceiling", "limit", _values(measured, "hit_ceiling_ttl"), dashed=True),
    ]
    load = {datetime.fromisoformat(h["hour"]): h for h in report.load}
    latency = [
        Series("p50", "p50", _values(load, "ranker_p50_ms")),
        Series("p99", "p99", _values(load, "ranker_p99_ms")),
    ]
    return [
        ChartSpec("coverage", "Coverage by tier", "share of the hour's requested pairs", percent, coverage),
        ChartSpec("fm_calls", "FM calls per hour against the budget", "FM calls per hour", count, calls),
        ChartSpec("hit", "Hit while fresh against its ceiling", "share of the pairs written", percent, hits),
        ChartSpec("latency", "Ranker latency per /rank (live load)", "ms", milliseconds, latency),
    ]


def page_charts(report: HealthReport) -> list[Chart]:
    start = report.at - report.hours * HOUR
    return [hourly_chart(c.key, c.title, c.unit, c.series, start, report.at, c.label) for c in chart_specs(report)]


def charts_json(report: HealthReport) -> dict[str, dict[str, object]]:
    """Per chart its title, unit and each series' points as ``[hour, value]``, oldest first."""
    return {
        c.key: {
            "title": c.title,
            "unit": c.unit,
            "series": {s.name: [[h.isoformat(), v] for h, v in sorted(s.values.items())] for s in c.series},
        }
        for c in chart_specs(report)
    }


def _one_per_hour(runs: list[RunHealth]) -> list[RunHealth]:
    """The newest record of each hour (``runs`` are newest first)."""
    seen: dict[datetime, RunHealth] = {}
    for run in runs:
        seen.setdefault(run.record.interval_start, run)
    return list(seen.values())


def _values(by_hour: dict[datetime, dict], key: str) -> dict[datetime, float]:
    return {hour: float(found[key]) for hour, found in by_hour.items() if found.get(key) is not None}
