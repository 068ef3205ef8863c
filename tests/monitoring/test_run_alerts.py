"""The health JSON is not ``ok`` when the latest precompute run failed, or when a run has stayed ``running`` far
longer than a run can take (its process died: the stack was stopped mid-run); a skipped hour is no failure.

The world's latest run (hour 11) failed; the tests add an hour-12 run on top of it. Times are the report's
``t`` (the app's clock), never the wall clock.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import pytest
from fastapi.testclient import TestClient
from health_world import HOUR, VMS, HealthWorld, T, add_run, run_key

from solaris.config import Settings
from solaris.monitoring.app import create_app
from solaris.store import open_store
from solaris.tracking import registry

MICROSECOND = timedelta(microseconds=1)


def _get(settings: Settings, path: str, t: datetime = T) -> tuple[int, dict | str]:
    response = TestClient(create_app(settings=lambda: settings, clock=lambda: t)).get(path)
    return response.status_code, response.json() if path.startswith("/api/") else response.text


def test_a_failed_latest_run_is_not_ok_and_named(health_world: HealthWorld) -> None:
    status, body = _get(health_world.settings, "/api/health")

    assert body["runs"][0]["run_id"] == run_key(11) and body["runs"][0]["status"] == "failed"
    assert body["problems"] == []  # every source was read: the run is what is wrong
    assert body["ok"] is False and status == 503
    [alert] = body["alerts"]
    assert (alert["run_id"], alert["status"]) == (run_key(11), "failed")
    assert run_key(11) in alert["message"] and "failed" in alert["message"]


def test_the_page_shows_why_it_is_not_ok(health_world: HealthWorld) -> None:
    status, page = _get(health_world.settings, "/")

    assert status == 200 and 'data-level="failing"' in page
    assert re.search(rf'<li class="level-failing" data-check="latest_run">[^<]*{run_key(11)} failed', page)


@pytest.mark.parametrize("outcome", ["succeeded", "skipped"])
def test_a_later_run_that_did_not_fail_is_ok(health_world: HealthWorld, outcome: str) -> None:
    """Only the latest run counts; ``skipped`` (an hour with nothing to precompute) is not a failure."""
    add_run(health_world.settings, 12, outcome, started_at=T)

    status, body = _get(health_world.settings, "/api/health", T + HOUR)

    assert [r["status"] for r in body["runs"]][:2] == [outcome, "failed"]
    assert body["ok"] is True and status == 200 and body["alerts"] == [] and body["problems"] == []


def test_a_run_left_running_long_ago_is_stale(health_world: HealthWorld) -> None:
    """The stack stopped mid-run a day before ``t``: the record still says running, the page says stale."""
    add_run(health_world.settings, 12, "running", started_at=T)

    status, body = _get(health_world.settings, "/api/health", T + 24 * HOUR)

    latest = body["runs"][0]
    assert latest["run_id"] == run_key(12) and latest["status"] == "running" and latest["stale"] is True
    assert body["ok"] is False and status == 503
    [alert] = body["alerts"]
    assert (alert["run_id"], alert["status"]) == (run_key(12), "stale")
    assert run_key(12) in alert["message"] and "running" in alert["message"]
    _, page = _get(health_world.settings, "/", T + 24 * HOUR)
    assert '<td class="status-stale"' in page and ">stale</td>" in page


def test_a_run_swept_as_failed_says_why_in_the_alert_the_json_and_the_page(health_world: HealthWorld) -> None:
    """What the next run (or ``stack up``) leaves of a run whose process died: failed, with the reason."""
    add_run(health_world.settings, 12, "running", started_at=T)
    reason = "its run ended before it finished (a killed task, a stopped stack); found by run hourly__13"
    with open_store(health_world.settings.store_url) as store:
        assert store.sweep_unfinished_runs(reason, T + HOUR) == [run_key(12)]

    status, body = _get(health_world.settings, "/api/health", T + HOUR)

    assert (body["runs"][0]["status"], body["runs"][0]["reason"]) == ("failed", reason) and status == 503
    assert body["alerts"][0]["message"].endswith(
        f"failed (hour 2026-03-01 12:00 UTC, finished 2026-03-01 13:00 UTC): {reason}"
    )
    _, page = _get(health_world.settings, "/", T + HOUR)
    assert f'<div class="small run-reason">{reason}</div>' in page


def test_stale_starts_after_the_threshold(health_world: HealthWorld) -> None:
    from solaris.monitoring.report import STALE_AFTER, build_report

    add_run(health_world.settings, 12, "running", started_at=T)
    client = registry.connect(health_world.settings)
    with open_store(health_world.settings.store_url) as store:
        at_limit = build_report(store, client, T + STALE_AFTER, vms=VMS)
        past_it = build_report(store, client, T + STALE_AFTER + MICROSECOND, vms=VMS)
        shorter = build_report(store, client, T + 2 * HOUR, vms=VMS, stale_after=HOUR)
        before_start = build_report(store, client, T - HOUR, vms=VMS)  # a report of the past: the run has not started

    assert STALE_AFTER >= 2 * HOUR  # far longer than an hourly run may take
    assert not at_limit.runs[0].stale and at_limit.alerts == [] and at_limit.ok
    assert past_it.runs[0].stale and [a.status for a in past_it.alerts] == ["stale"] and not past_it.ok
    assert shorter.runs[0].stale and not shorter.ok
    assert not before_start.runs[0].stale and before_start.ok
    assert not any(r.stale for r in past_it.runs[1:])  # finished runs are never stale


def test_only_the_latest_run_decides_but_every_stale_run_is_shown(health_world: HealthWorld) -> None:
    """An older run left running (the stack stopped mid-run, later hours ran) shows as stale; a later
    succeeded run makes the report ok again."""
    add_run(health_world.settings, 12, "running", started_at=T)
    add_run(health_world.settings, 13, "succeeded", started_at=T + 24 * HOUR)

    status, body = _get(health_world.settings, "/api/health", T + 25 * HOUR)

    assert [(r["run_id"], r["stale"]) for r in body["runs"][:2]] == [(run_key(13), False), (run_key(12), True)]
    assert body["ok"] is True and status == 200 and body["alerts"] == []
