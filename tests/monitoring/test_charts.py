"""The page's charts: where an hour lands, gaps, round axes, and which figure of a run goes to which hour; the
ranker's figures read back from its real /metrics text."""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from health_world import closed_port
from prometheus_client import generate_latest

from solaris.monitoring.charts import PLOT_HEIGHT, PLOT_WIDTH, Series, hourly_chart, nice_ceiling, percent
from solaris.monitoring.page_charts import charts_json, page_charts
from solaris.monitoring.ranker_state import LOAD_FILE, METRICS, from_metrics, ranker_state
from solaris.monitoring.report import COVERAGE_TIERS, CoveragePoint, HealthReport, RunHealth
from solaris.serving.metrics import TOTAL_STAGE, VERSION_MISSING, RankerMetrics
from solaris.store.records import RunRecord

HOUR = timedelta(hours=1)
START = datetime(2026, 3, 1, 12, tzinfo=UTC)


def test_hours_land_on_x_missing_hours_break_the_line_and_y_tops_at_a_round_value() -> None:
    values = {START + h * HOUR: 0.1 * h for h in (0, 1, 2, 5, 7, 8)}  # hours 3-4 and 6 missing
    chart = hourly_chart("k", "title", "unit", [Series("s", "css", values)], START, START + 10 * HOUR, percent)

    [line] = chart.lines
    assert line.segments == [
        f"0.0,{PLOT_HEIGHT}.0 {PLOT_WIDTH / 10},{PLOT_HEIGHT * 0.9} {PLOT_WIDTH / 5},{PLOT_HEIGHT * 0.8}",
        f"{PLOT_WIDTH * 0.7},{PLOT_HEIGHT * 0.3} {PLOT_WIDTH * 0.8},{PLOT_HEIGHT * 0.2}",
    ]
    assert line.dots == [(PLOT_WIDTH * 0.5, PLOT_HEIGHT * 0.5)]  # hour 5 stands alone
    assert [label for _, label in chart.y_ticks] == ["0%", "25%", "50%", "75%", "100%"]  # 0.8 rounds up to 1
    assert [label for _, label in chart.x_ticks] == ["Mar 01", "18:00"] and not chart.empty


def test_hours_outside_the_window_and_non_finite_values_are_left_out() -> None:
    values = {START - HOUR: 5.0, START: math.nan, START + 2 * HOUR: math.inf}
    chart = hourly_chart("k", "t", "u", [Series("s", "c", values)], START, START + 4 * HOUR, percent)

    assert chart.empty and chart.lines[0].segments == [] and chart.lines[0].dots == []


@pytest.mark.parametrize(("value", "top"), [(0, 1), (0.8, 1), (13.5, 20), (0.2, 0.2), (23, 25), (60001, 100000)])
def test_nice_ceiling(value: float, top: float) -> None:
    assert nice_ceiling(value) == pytest.approx(top)


def _report() -> HealthReport:
    at = START + 4 * HOUR
    runs = []
    for h in (3, 2, 1):  # newest first; hour 1 failed
        status = "failed" if h == 1 else "succeeded"
        counts = {"selected": 100 * h, "fm_budget": 500} if status == "succeeded" else {}
        record = RunRecord(
            f"r{h}", START + h * HOUR, START + (h + 1) * HOUR, "1", "1", "1", "e", status, counts, {}, at, at
        )
        runs.append(RunHealth(record, {"hit_rate_ttl": 0.01 * h, "hit_ceiling_ttl": 0.2}))
    coverage = [CoveragePoint(START + h * HOUR, dict.fromkeys(COVERAGE_TIERS, 0.1) | {"any": 0.5}) for h in (1, 2)]
    load = [{"hour": (START + 3 * HOUR).isoformat(), "ranker_p50_ms": 4.0, "ranker_p99_ms": 11.0}]
    return HealthReport(at, None, None, [], runs, coverage, load=load, history=runs, hours=4)


def test_a_runs_calls_are_its_own_hour_and_its_figures_the_hour_before() -> None:
    series = charts_json(_report())

    calls = series["fm_calls"]["series"]
    assert calls["FM calls (pairs selected)"] == [[(START + h * HOUR).isoformat(), 100.0 * h] for h in (2, 3)]
    assert calls["fm_budget"] == [[(START + h * HOUR).isoformat(), 500.0] for h in (2, 3)]
    hit = series["hit"]["series"]["hit while fresh"]
    assert hit == [[(START + (h - 1) * HOUR).isoformat(), pytest.approx(0.01 * h)] for h in (1, 2, 3)]
    assert series["latency"]["series"]["p99"] == [[(START + 3 * HOUR).isoformat(), 11.0]]
    assert series["coverage"]["series"]["any"] == [[(START + h * HOUR).isoformat(), 0.5] for h in (1, 2)]


def test_the_page_draws_four_charts_and_an_empty_one_says_so() -> None:
    report = _report()
    charts = page_charts(report)

    assert [c.key for c in charts] == ["coverage", "fm_calls", "hit", "latency"]
    assert not any(c.empty for c in charts)
    no_load = page_charts(HealthReport(report.at, None, None, [], [], [], hours=4))
    assert all(c.empty for c in no_load)


def test_the_rankers_metrics_give_its_quantiles_and_degraded_vms() -> None:
    metrics = RankerMetrics(("ctr", "cvr"))
    for seconds in [0.004] * 98 + [0.04, 0.2]:  # p50 in the 4 ms bucket; p99 in the 50 ms one
        metrics.latency.labels("ctr", TOTAL_STAGE).observe(seconds)
    metrics.latency.labels("ctr", "store").observe(0.9)  # a stage, not a request: not counted
    metrics.degraded.labels("cvr", VERSION_MISSING).set(1)

    state = from_metrics(generate_latest(metrics.registry).decode())

    assert (state.source, state.p50_ms, state.p99_ms) == (METRICS, 4.0, 50.0)
    assert state.degraded == {"cvr": VERSION_MISSING}


def test_a_ranker_that_does_not_answer_falls_back_to_the_load_file() -> None:
    load = [{"hour": START.isoformat(), "ranker_p50_ms": 3.0, "ranker_p99_ms": 9.0}]
    down = f"http://127.0.0.1:{closed_port()}"

    assert ranker_state(down, load) == ranker_state(None, load)
    assert ranker_state(down, load).source == LOAD_FILE and ranker_state(down, load).p99_ms == 9.0
    assert ranker_state(down, []) is None
    assert from_metrics("").p99_ms is None  # a ranker that has ranked nothing yet
