"""A precompute whose process died mid-way (a killed task, a stopped stack) leaves its run record ``running``;
the next hour's run marks it failed, naming itself, and counts what it swept."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from solaris.config import Settings
from solaris.precompute import nodes
from solaris.precompute.run import run_hour
from solaris.store import open_store

PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu"}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history
NEXT = HOUR + timedelta(hours=1)


def test_a_run_killed_after_its_first_step_is_failed_by_the_next_hours_run(run_settings: Settings) -> None:
    killed = nodes.hour_run(nodes.resolve(run_settings, HOUR, PARAMS, HOUR))  # no step after this one ran
    done = run_hour(run_settings, NEXT, PARAMS, clock=lambda: NEXT)
    with open_store(run_settings.store_url) as store:
        dead, alive = store.get_run(killed.run_key), store.get_run(done["run_key"])

    assert dead is not None and dead.status == "failed" and dead.finished_at == NEXT
    assert "ended before it finished" in dead.reason and done["run_key"] in dead.reason  # type: ignore[operator]
    assert alive is not None and alive.status == "succeeded" and alive.reason is None
    assert done["counts"]["swept_runs"] == 1
