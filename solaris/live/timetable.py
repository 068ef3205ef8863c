"""The DAGs' schedule on the live clock: data intervals are simulated hours (or days), due on the wall clock.

A run for the interval ``[start, end)`` is due when the clock reaches ``end + SETTLE`` (simulated), so the
traffic simulator, which writes each simulated hour once it is over, has written the interval's last hour
before the run reads it. Its logical date, data interval and every time the run records stay simulated.

Airflow finds the class through the plugin (``plugins/solaris_plugin.py`` lists it in ``timetables``), as
custom timetables must be registered. The wall clock is read here, where a schedule meets it, and nowhere in
the jobs.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum
from airflow.timetables.base import DagRunInfo, DataInterval, TimeRestriction, Timetable

from solaris.live.clock import HOUR, LiveClock

SETTLE = timedelta(minutes=3)  # simulated: the wait after an interval ends before its run is due
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)  # intervals are aligned to multiples of their length since it


class SimulatedIntervals(Timetable):
    """Consecutive intervals of ``hours`` simulated hours (1: hourly, 24: daily at simulated midnight UTC)."""

    run_ordering = ("data_interval_end", "logical_date")

    def __init__(self, clock: LiveClock, hours: int = 1) -> None:
        if not isinstance(hours, int) or isinstance(hours, bool) or not 1 <= hours <= 24 or 24 % hours:
            raise ValueError(f"simulated intervals of {hours!r} hours: use a whole divisor of 24")
        self.clock, self.hours = clock, hours
        self.description = (
            f"every {hours} simulated hour(s) of {clock.hour_seconds:g} s, from {clock.sim_start.isoformat()}"
        )

    @property
    def every(self) -> timedelta:
        return self.hours * HOUR

    @property
    def summary(self) -> str:
        return f"simulated {self.hours}h @ {self.clock.hour_seconds:g}s"

    def serialize(self) -> dict[str, Any]:
        return {"clock": self.clock.to_json(), "hours": self.hours}

    @classmethod
    def deserialize(cls, data: dict[str, Any]) -> SimulatedIntervals:
        return cls(LiveClock.from_json(data["clock"]), int(data["hours"]))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, SimulatedIntervals) and (self.clock, self.hours) == (other.clock, other.hours)

    def __hash__(self) -> int:
        return hash((self.clock, self.hours))

    def floor(self, sim: datetime) -> datetime:
        """The interval boundary at or before ``sim``."""
        return sim - (sim - EPOCH) % self.every

    def latest_ended(self, wall: datetime) -> DataInterval:
        """The last interval over at wall time ``wall``."""
        end = self.floor(self.clock.sim_at(wall))
        return DataInterval(pendulum.instance(end - self.every), pendulum.instance(end))

    def due(self, start: datetime) -> DagRunInfo:
        end = start + self.every
        return DagRunInfo(
            run_after=pendulum.instance(self.clock.wall_at(end + SETTLE)),
            data_interval=DataInterval(pendulum.instance(start), pendulum.instance(end)),
        )

    def infer_manual_data_interval(self, *, run_after: pendulum.DateTime) -> DataInterval:
        """A run triggered by hand covers the last interval over when it was triggered."""
        return self.latest_ended(run_after)

    def next_dagrun_info(
        self, *, last_automated_data_interval: DataInterval | None, restriction: TimeRestriction
    ) -> DagRunInfo | None:
        """The interval after the last scheduled one, from the clock's start. The DAG's start and end dates are
        wall times and bound nothing here: the clock does. Without catchup, intervals already over are skipped
        up to the last one, as Airflow's own timetables skip missed runs."""
        start = self.floor(self.clock.sim_start) - self.every
        if last_automated_data_interval is not None:
            start = max(start, last_automated_data_interval.end)
        if not restriction.catchup:
            start = max(start, self.latest_ended(datetime.now(UTC)).start)
        return self.due(start)


def live_or(hours: int, otherwise: str) -> SimulatedIntervals | str:
    """A DAG's schedule: ``hours``-long simulated intervals when the stack runs live (``SOLARIS_LIVE_CLOCK``
    set for every Airflow process), else ``otherwise`` on the wall clock."""
    clock = LiveClock.from_env()
    return otherwise if clock is None else SimulatedIntervals(clock, hours)
