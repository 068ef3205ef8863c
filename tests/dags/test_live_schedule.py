"""The live schedule as Airflow's scheduler asks it: next runs, manual runs, and the DAGs built on it."""

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from types import SimpleNamespace
from typing import Any

import pytest

from solaris.airflow_env import DAGS_FOLDER
from solaris.live.clock import CLOCK_ENV, LiveClock

SIM = datetime(2026, 1, 8, tzinfo=UTC)


@pytest.fixture
def tt(airflow_env: dict[str, str]) -> SimpleNamespace:
    """The timetable's names, imported once the session has bootstrapped Airflow (conftest)."""
    from airflow.timetables.base import DataInterval, TimeRestriction

    from solaris.live.timetable import SETTLE, SimulatedIntervals

    no_catchup, catchup = TimeRestriction(None, None, False), TimeRestriction(None, None, True)
    return SimpleNamespace(
        Interval=DataInterval, Intervals=SimulatedIntervals, SETTLE=SETTLE, NO_CATCHUP=no_catchup, CATCHUP=catchup
    )


def clock_started(seconds_ago: float, hour_seconds: float = 60) -> LiveClock:
    return LiveClock(SIM, datetime.now(UTC) - timedelta(seconds=seconds_ago), hour_seconds)


def test_scheduled_runs_are_consecutive_simulated_hours_due_once_each_is_over(tt: SimpleNamespace) -> None:
    timetable = tt.Intervals(clock_started(0), hours=1)
    first = timetable.next_dagrun_info(last_automated_data_interval=None, restriction=tt.NO_CATCHUP)
    # the last hour before the clock started: the first live run precomputes the clock's first hour
    assert first.data_interval == tt.Interval(SIM - timedelta(hours=1), SIM)
    assert first.logical_date == SIM - timedelta(hours=1)  # simulated, as every time the run records
    assert first.run_after == timetable.clock.wall_at(SIM + tt.SETTLE)
    runs = [first]
    for _ in range(3):
        runs.append(
            timetable.next_dagrun_info(last_automated_data_interval=runs[-1].data_interval, restriction=tt.NO_CATCHUP)
        )
    assert [r.data_interval.start for r in runs] == [SIM + timedelta(hours=h) for h in (-1, 0, 1, 2)]
    assert [round((b.run_after - a.run_after).total_seconds(), 6) for a, b in zip(runs, runs[1:])] == [60.0] * 3


def test_without_catchup_the_intervals_missed_are_skipped_to_the_last_one_over(tt: SimpleNamespace) -> None:
    timetable = tt.Intervals(clock_started(seconds_ago=60 * 5 + 30))  # 5.5 simulated hours ago
    last = tt.Interval(SIM - timedelta(hours=1), SIM)
    skipped = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=tt.NO_CATCHUP)
    assert skipped.data_interval == tt.Interval(SIM + timedelta(hours=4), SIM + timedelta(hours=5))
    caught_up = timetable.next_dagrun_info(last_automated_data_interval=last, restriction=tt.CATCHUP)
    assert caught_up.data_interval == tt.Interval(SIM, SIM + timedelta(hours=1))


def test_a_manual_run_covers_the_last_interval_over_when_it_was_triggered(tt: SimpleNamespace) -> None:
    clock = clock_started(0)
    hourly, daily = tt.Intervals(clock, 1), tt.Intervals(clock, 24)
    at = clock.wall_at(SIM + timedelta(hours=30, minutes=20))
    assert hourly.infer_manual_data_interval(run_after=at) == tt.Interval(
        SIM + timedelta(hours=29), SIM + timedelta(hours=30)
    )
    assert daily.infer_manual_data_interval(run_after=at) == tt.Interval(SIM, SIM + timedelta(days=1))


def test_daily_intervals_are_simulated_days_from_midnight(tt: SimpleNamespace) -> None:
    clock = LiveClock(SIM + timedelta(hours=7), datetime.now(UTC), 60)
    run = tt.Intervals(clock, 24).next_dagrun_info(last_automated_data_interval=None, restriction=tt.NO_CATCHUP)
    assert run.data_interval == tt.Interval(SIM - timedelta(days=1), SIM)


@pytest.mark.parametrize("hours", [0, 5, 25, 1.5, True])
def test_an_interval_that_does_not_divide_a_day_is_refused(tt: SimpleNamespace, hours: Any) -> None:
    with pytest.raises(ValueError, match="whole divisor of 24"):
        tt.Intervals(clock_started(0), hours)


PROBE = """
import json, sys
from airflow.models import DagBag
from airflow.serialization.serialized_objects import DagSerialization
from airflow.timetables.base import TimeRestriction
bag = DagBag(dag_folder=sys.argv[1])
out = {"errors": {k: str(v) for k, v in bag.import_errors.items()}}
for dag_id in ("solaris_precompute", "solaris_train"):
    scheduled = DagSerialization.from_dict(DagSerialization.to_dict(bag.dags[dag_id]))  # dag-processor -> scheduler
    info = scheduled.timetable.next_dagrun_info(last_automated_data_interval=None, restriction=TimeRestriction(None, None, False))
    out[dag_id] = [type(scheduled.timetable).__name__, info.data_interval.start.isoformat(), info.data_interval.end.isoformat()]
print(json.dumps(out))
"""


def test_the_stack_running_live_schedules_both_dags_on_the_clock_through_airflows_serialization(
    airflow_env: dict[str, str],
) -> None:
    """Parsed with the clock in the environment (as ``stack up`` passes it), serialized and read back as the
    scheduler reads it: that needs the timetable registered by the plugin."""
    env = os.environ | airflow_env | {CLOCK_ENV: clock_started(0).to_json()}
    done = subprocess.run([sys.executable, "-c", PROBE, str(DAGS_FOLDER)], env=env, capture_output=True, text=True)
    assert done.returncode == 0, done.stderr[-3000:]
    out = json.loads(done.stdout.strip().splitlines()[-1])
    assert out["errors"] == {}
    assert out["solaris_precompute"] == ["SimulatedIntervals", "2026-01-07T23:00:00+00:00", "2026-01-08T00:00:00+00:00"]
    assert out["solaris_train"] == ["SimulatedIntervals", "2026-01-07T00:00:00+00:00", "2026-01-08T00:00:00+00:00"]
