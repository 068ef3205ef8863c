from datetime import UTC, datetime, timedelta

import pytest

from solaris.live.clock import CLOCK_ENV, LiveClock

SIM = datetime(2026, 1, 8, tzinfo=UTC)
WALL = datetime(2026, 12, 3, 16, 0, 7, tzinfo=UTC)


def test_an_accelerated_clock_runs_one_simulated_hour_per_hour_seconds_and_back() -> None:
    clock = LiveClock(SIM, WALL, hour_seconds=30)
    assert clock.sim_at(WALL) == SIM
    assert clock.sim_at(WALL + timedelta(seconds=45)) == SIM + timedelta(minutes=90)
    assert clock.wall_at(SIM + timedelta(hours=24)) == WALL + timedelta(minutes=12)
    at = SIM + timedelta(hours=5, minutes=17)
    assert clock.sim_at(clock.wall_at(at)) == at
    assert LiveClock(SIM, WALL).sim_at(WALL + timedelta(minutes=3)) == SIM + timedelta(minutes=3)  # real time


def test_the_clock_travels_as_json_through_its_environment_variable() -> None:
    clock = LiveClock(SIM, WALL, hour_seconds=12.5)
    assert LiveClock.from_env({CLOCK_ENV: clock.to_json()}) == clock
    assert LiveClock.from_env({}) is None


@pytest.mark.parametrize(
    ("sim", "wall", "hour_seconds", "named"),
    [
        (SIM.replace(tzinfo=None), WALL, 60, "sim_start must be a datetime with a timezone"),
        (SIM, WALL.replace(tzinfo=None), 60, "wall_start must be a datetime with a timezone"),
        (SIM + timedelta(minutes=30), WALL, 60, "must be on the hour"),
        (SIM, WALL, 0.5, "hour_seconds must be at least 1"),
        (SIM, WALL, float("nan"), "hour_seconds must be at least 1"),
    ],
)
def test_a_clock_that_cannot_run_is_refused_naming_the_field(
    sim: datetime, wall: datetime, hour_seconds: float, named: str
) -> None:
    with pytest.raises(ValueError, match=named):
        LiveClock(sim, wall, hour_seconds)


def test_a_malformed_clock_variable_names_the_variable() -> None:
    with pytest.raises(ValueError, match=f"{CLOCK_ENV}=.*is not a live clock"):
        LiveClock.from_env({CLOCK_ENV: '{"sim_start": "2026-01-08T00:00:00+00:00"}'})
