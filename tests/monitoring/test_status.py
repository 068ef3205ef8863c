"""The status line: each check on both sides of each of its thresholds, the worst level wins, and the page and
the JSON show the thresholds as :data:`THRESHOLDS` declares them."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from health_world import HealthWorld, T

from solaris.monitoring.app import create_app
from solaris.monitoring.ranker_state import LOAD_FILE, RankerState
from solaris.monitoring.report import CoveragePoint, HealthReport, Problem, RunHealth
from solaris.monitoring.status import (
    COVERAGE_VS_DAY,
    DEGRADED_VMS,
    FM_CALLS_VS_BUDGET,
    HIT_VS_CEILING,
    MIN_DAY_HOURS,
    RANKER_P99,
    RUN_AGE,
    SHADOW_DROP,
    THRESHOLDS,
    coverage_vs_day,
    fm_calls_vs_budget,
    health_status,
    hit_vs_ceiling,
    ranker_readings,
    run_age,
    shadow_drop,
)
from solaris.store.records import RunRecord

HOUR = timedelta(hours=1)
NOW = datetime(2026, 3, 3, 12, 20, tzinfo=UTC)


def _run(hours_before: float, status: str = "succeeded", counts=None, figures=None) -> RunHealth:
    """A run whose hour ended ``hours_before`` NOW."""
    end = NOW - hours_before * HOUR
    record = RunRecord(
        f"run-{hours_before}", end - HOUR, end, "1", "1", "1", "fm1-ae1-d8", status, counts or {}, {}, end, end
    )
    return RunHealth(record, figures or {})


@pytest.mark.parametrize(("hours", "level"), [(0.3, "healthy"), (1.9, "healthy"), (2.1, "degraded"), (6.5, "failing")])
def test_run_age_against_the_schedule(hours: float, level: str) -> None:
    reading = run_age([_run(hours)], NOW)

    assert reading.value == pytest.approx(hours) and reading.level == level


def test_run_age_counts_the_latest_finished_run_and_none_is_a_reason() -> None:
    runs = [_run(0.5, "failed"), _run(1.5, "skipped"), _run(9, "succeeded")]

    assert run_age(runs, NOW).value == pytest.approx(1.5)  # a failed run is not the schedule keeping up
    assert run_age([_run(0.5, "running")], NOW).level == "degraded"
    assert run_age([], NOW).value is None and run_age([], NOW).level == "degraded"


def _day(latest: float, mean: float = 0.7, hours: int = 24) -> list[CoveragePoint]:
    start = NOW.replace(minute=0) - hours * HOUR
    points = [CoveragePoint(start + i * HOUR, {"any": mean}) for i in range(hours)]
    return [*points, CoveragePoint(start + hours * HOUR, {"any": latest})]


@pytest.mark.parametrize(
    ("latest", "level"), [(0.7, "healthy"), (0.57, "healthy"), (0.55, "degraded"), (0.3, "failing")]
)
def test_coverage_against_the_day_before(latest: float, level: str) -> None:
    reading = coverage_vs_day(_day(latest))

    assert reading.value == pytest.approx(latest / 0.7) and reading.level == level


def test_coverage_needs_a_few_hours_of_the_day_before() -> None:
    reading = coverage_vs_day(_day(0.1, hours=MIN_DAY_HOURS - 1))

    assert reading.value is None and reading.level == "healthy" and "needed" in reading.message


@pytest.mark.parametrize(("hit", "level"), [(0.1, "healthy"), (0.061, "healthy"), (0.059, "degraded")])
def test_hit_while_fresh_against_its_ceiling(hit: float, level: str) -> None:
    reading = hit_vs_ceiling([_run(1, figures={"hit_rate_ttl": hit, "hit_ceiling_ttl": 0.15})])

    assert reading.value == pytest.approx(hit / 0.15) and reading.level == level


@pytest.mark.parametrize(("selected", "level"), [(59_000, "healthy"), (60_000, "healthy"), (60_001, "failing")])
def test_fm_calls_against_the_budget(selected: int, level: str) -> None:
    reading = fm_calls_vs_budget([_run(1, counts={"selected": selected, "fm_budget": 60_000})])

    assert reading.level == level


def test_a_verifier_run_has_no_budget_to_hold() -> None:
    reading = fm_calls_vs_budget([_run(1, counts={"selected": 90_000})])

    assert reading.value is None and reading.level == "healthy"


@pytest.mark.parametrize(("p99", "level"), [(12.0, "healthy"), (50.0, "healthy"), (51.0, "degraded"), (300, "failing")])
def test_ranker_p99(p99: float, level: str) -> None:
    p99_reading, degraded = ranker_readings(RankerState(LOAD_FILE, 5.0, p99, None))

    assert p99_reading.level == level and degraded.value is None  # a load file cannot tell


def test_a_degraded_vm_is_a_reason_naming_it() -> None:
    _, none = ranker_readings(RankerState("metrics", 5.0, 9.0, {}))
    _, one = ranker_readings(RankerState("metrics", 5.0, 9.0, {"cvr": "version_missing"}))

    assert none.level == "healthy" and (one.level, one.value) == ("degraded", 1)
    assert "cvr (version_missing)" in one.message


@pytest.mark.parametrize(("shadow", "level"), [(0.7, "healthy"), (0.61, "healthy"), (0.59, "degraded")])
def test_a_pending_challengers_shadow_coverage(shadow: float, level: str) -> None:
    reading = shadow_drop([_run(1, figures={"coverage_any": 0.7, "shadow_coverage_any": shadow})])

    assert reading.value == pytest.approx(0.7 - shadow) and reading.level == level
    assert shadow_drop([_run(1, figures={"coverage_any": 0.7})]).value is None  # no challenger: nothing to judge


def _report(runs: list[RunHealth], problems: list[Problem] | None = None, ranker=None) -> HealthReport:
    return HealthReport(NOW, None, None, [], runs, _day(0.7), problems or [], history=runs, ranker=ranker)


def test_the_worst_reading_is_the_level_and_its_reasons_come_first() -> None:
    runs = [_run(0.2, counts={"selected": 10, "fm_budget": 100}, figures={"hit_rate_ttl": 0.01, "hit_ceiling_ttl": 1})]

    degraded = health_status(_report(runs))
    failing = health_status(_report(runs, ranker=RankerState(LOAD_FILE, 1.0, 900.0, None)))
    unreadable = health_status(_report(runs, problems=[Problem("feature store", "OperationalError: down")]))

    assert degraded.level == "degraded" and [r.check for r in degraded.reasons] == [HIT_VS_CEILING.name]
    assert failing.level == "failing" and [r.check for r in failing.reasons] == [RANKER_P99.name, HIT_VS_CEILING.name]
    assert (
        unreadable.level == "failing" and "feature store unavailable: OperationalError" in unreadable.reasons[0].message
    )
    healthy = health_status(_report([_run(0.2)]))
    assert healthy.level == "healthy" and healthy.reasons == []


def test_every_threshold_is_in_the_json_and_on_the_page(health_world: HealthWorld) -> None:
    client = TestClient(create_app(settings=lambda: health_world.settings, clock=lambda: T))

    status = client.get("/api/health").json()["status"]
    page = client.get("/").text

    declared = [RUN_AGE, COVERAGE_VS_DAY, HIT_VS_CEILING, FM_CALLS_VS_BUDGET, RANKER_P99, DEGRADED_VMS, SHADOW_DROP]
    assert [t["name"] for t in status["thresholds"]] == [t.name for t in declared] == [t.name for t in THRESHOLDS]
    assert {r["check"] for r in status["readings"]} >= {t.name for t in THRESHOLDS}
    # The world's latest run failed at hour 11: the level is failing, and the reason says which run.
    assert status["level"] == "failing" and status["reasons"][0]["check"] == "latest_run"
    assert f'data-level="{status["level"]}"' in page
    for t in THRESHOLDS:
        assert f'<tr data-check="{t.name}">' in page
    assert f"above {RUN_AGE.degraded:g} h" in page and f"below {COVERAGE_VS_DAY.failing:g} ratio" in page
