"""The live clock: which simulated time it is at a wall-clock time, and back.

Simulated time starts at ``sim_start`` (on the hour) at the wall time ``wall_start`` and runs one simulated hour
every ``hour_seconds`` wall seconds (3600: real time). Everything that runs live takes its times from one clock:
the DAGs' schedules (:mod:`solaris.live.timetable`), the traffic simulator, TTLs and expiry. Logic only ever
sees simulated times; the wall clock is read where a schedule meets it. Stdlib only: DAG files import it.
"""

from __future__ import annotations

import json
import os
from collections.abc import Mapping
from dataclasses import dataclass
from datetime import datetime, timedelta

CLOCK_ENV = "SOLARIS_LIVE_CLOCK"  # the clock as JSON (LiveClock.to_json); unset: nothing runs live
REAL_TIME_HOUR_SECONDS = 3600.0
MIN_HOUR_SECONDS = 1.0  # below a second per simulated hour the scheduler's own loop is the clock
HOUR = timedelta(hours=1)


def check_hour_seconds(hour_seconds: float) -> None:
    if not hour_seconds >= MIN_HOUR_SECONDS:  # also refuses NaN
        raise ValueError(f"live clock: hour_seconds must be at least {MIN_HOUR_SECONDS:g}, got {hour_seconds}")


@dataclass(frozen=True)
class LiveClock:
    sim_start: datetime
    wall_start: datetime
    hour_seconds: float = REAL_TIME_HOUR_SECONDS

    def __post_init__(self) -> None:
        for name in ("sim_start", "wall_start"):
            value = getattr(self, name)
            if not isinstance(value, datetime) or value.tzinfo is None:
                raise ValueError(f"live clock: {name} must be a datetime with a timezone, got {value!r}")
        if self.sim_start.minute or self.sim_start.second or self.sim_start.microsecond:
            raise ValueError(f"live clock: sim_start {self.sim_start.isoformat()} must be on the hour")
        check_hour_seconds(self.hour_seconds)

    @property
    def speedup(self) -> float:
        return REAL_TIME_HOUR_SECONDS / self.hour_seconds

    def sim_at(self, wall: datetime) -> datetime:
        """The simulated time at wall time ``wall``."""
        return self.sim_start + (wall - self.wall_start) * self.speedup

    def wall_at(self, sim: datetime) -> datetime:
        """The wall time at which simulated time reaches ``sim``."""
        return self.wall_start + (sim - self.sim_start) / self.speedup

    def to_json(self) -> str:
        starts = {"sim_start": self.sim_start.isoformat(), "wall_start": self.wall_start.isoformat()}
        return json.dumps(starts | {"hour_seconds": self.hour_seconds})

    @classmethod
    def from_json(cls, text: str) -> LiveClock:
        try:
            values = json.loads(text)
            return cls(
                datetime.fromisoformat(values["sim_start"]),
                datetime.fromisoformat(values["wall_start"]),
                float(values["hour_seconds"]),
            )
        except (ValueError, KeyError, TypeError) as exc:
            raise ValueError(f"{CLOCK_ENV}={text!r} is not a live clock: {exc}") from None

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> LiveClock | None:
        """The clock the stack runs on, None when it does not run live."""
        text = (os.environ if env is None else env).get(CLOCK_ENV)
        return cls.from_json(text) if text else None
