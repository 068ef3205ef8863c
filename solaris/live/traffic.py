"""Live traffic: a synthetic world's event log continued hour by hour as the live clock reaches each hour.

The world's simulator is deterministic (one seeded generator, drawn in a fixed order), so continuing a log is
replaying the simulator over the hours already written, drawing exactly what generated them, then writing the
next ones: the continued log equals the one a single generation of the same span would have written. A world
is generated with room to continue (``generate_world(..., hours=...)`` writes a prefix of its span, its
population drawn for the whole span); live traffic ends at that horizon.

An hour is written once the clock has passed its end (its partitions first, then meta.json, so a reader never
sees the log claim an hour it lacks); the DAGs' schedule waits a little after each hour for it
(:data:`solaris.live.timetable.SETTLE`).
"""

from __future__ import annotations

import queue
import threading
from collections.abc import Callable, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

from solaris.data.eventlog import EventLog, write_meta
from solaris.data.synthetic.config import WorldConfig
from solaris.data.synthetic.simulate import HourBatch, Simulator
from solaris.data.synthetic.stats import WorldStats
from solaris.data.synthetic.world import world_meta, write_hour
from solaris.live.clock import HOUR, LiveClock, check_hour_seconds
from solaris.live.load import LAG, LoadStats, drive_load

MAX_WAIT_S = 1.0  # how long the loop sleeps at most between looks at the clock (a stop is heard within it)


class HorizonReached(RuntimeError):
    """The world has no hours left to continue."""


class LiveWorld:
    """A synthetic world's log, continued one hour at a time."""

    def __init__(self, root: Path) -> None:
        self.log = EventLog(Path(root))
        meta = generated_meta(self.log)
        self.config = WorldConfig.from_dict(meta["config"])
        self._name, self._side_counts = meta["name"], {k: meta["counts"][k] for k in ("users", "items")}
        self.simulator = Simulator(self.config)
        self._batches: Iterator[HourBatch] = self.simulator.hours()
        self.stats = WorldStats.empty(self.config.n_items)
        self.written = int(meta["hours"])
        for _ in range(self.written):  # the same draws as the generation, discarded
            self.stats.add(next(self._batches))

    @property
    def end(self) -> datetime:
        """The end of the last hour written: the next hour starts here."""
        return self.config.start + self.written * HOUR

    @property
    def horizon(self) -> datetime:
        return self.config.start + self.config.hours * HOUR

    def write_next(self) -> datetime:
        """Simulate and write the next hour; returns its start."""
        if self.written >= self.config.hours:
            raise HorizonReached(
                f"{self.log.root.name} is written to its horizon {self.horizon.isoformat()}: generate it with more"
                " days (and --hours for the part to write up front) to run it live longer"
            )
        hour = self.end
        batch = next(self._batches)
        write_hour(self.log.root, batch)
        self.stats.add(batch)
        self.written += 1
        counts = self._side_counts | self.stats.counts()  # the side tables do not change as hours are added
        write_meta(self.log.root, world_meta(self.config, self._name, self.stats, self.written) | {"counts": counts})
        return hour

    def write_due(self, clock: LiveClock, wall: datetime) -> list[datetime]:
        """Every hour that has ended on ``clock`` by wall time ``wall`` and is not written yet, up to the horizon."""
        due = min(clock.sim_at(wall), self.horizon)
        written = []
        while self.end + HOUR <= due:
            written.append(self.write_next())
        return written


def generated_meta(log: EventLog) -> dict[str, Any]:
    """The log's meta.json, refused unless a generated world wrote it: only the simulator can continue a log."""
    meta = log.meta
    if meta.get("source") != "synthetic" or "config" not in meta:
        raise ValueError(f"world {log.root.name!r} is a {meta.get('source')!r} log; only a generated world continues")
    return meta


def resume_clock(root: Path, hour_seconds: float, wall_start: datetime) -> LiveClock:
    """The clock to run a world live on: its simulated time resumes at its log's end at ``wall_start``.
    Refuses a world with no hours left to write, naming how to generate one with room."""
    check_hour_seconds(hour_seconds)
    meta = generated_meta(EventLog(root))
    end = datetime.fromisoformat(meta["end"])
    if meta.get("horizon_hours", meta["hours"]) <= meta["hours"]:
        raise ValueError(
            f"world {root.name!r} has no hours left to continue (ends {end.isoformat()});"
            " generate it with room, e.g. `solaris data generate --days 10 --hours 72`"
        )
    return LiveClock(end, wall_start, hour_seconds)


def run_live(
    world: LiveWorld,
    clock: LiveClock,
    stop: threading.Event,
    wall_now: Callable[[], datetime] = lambda: datetime.now(UTC),
    on_hour: Callable[[datetime], None] = lambda hour: None,
    on_tick: Callable[[], None] = lambda: None,
) -> None:
    """Write each hour as the clock passes its end, until ``stop`` is set or the horizon is reached;
    ``on_tick`` runs each time the loop looks at the clock (at least every ``MAX_WAIT_S``)."""
    while world.written < world.config.hours:
        on_tick()
        for hour in world.write_due(clock, wall_now()):
            on_hour(hour)
        wait = (clock.wall_at(world.end + HOUR) - wall_now()) / timedelta(seconds=1)
        if stop.wait(min(max(wait, 0.0), MAX_WAIT_S)):
            return


def run_with_load(
    world: LiveWorld,
    clock: LiveClock,
    stop: threading.Event,
    ranker_url: str | None,
    totals: LoadStats,
    on_hour: Callable[[datetime], None] = lambda hour: None,
    on_tick: Callable[[], None] = lambda: None,
    on_sent: Callable[[datetime, LoadStats], None] = lambda hour, stats: None,
) -> None:
    """:func:`run_live` with the load driver beside it when ``ranker_url`` is given: each hour written is
    sent (``on_sent`` gets its figures). At the horizon it waits for the last hour's requests, which fall
    due a ``LAG`` after it."""
    if ranker_url is None:
        run_live(world, clock, stop, on_hour=on_hour, on_tick=on_tick)
        return
    hours: queue.Queue[datetime] = queue.Queue()
    driver = threading.Thread(
        target=drive_load, args=(world.log, ranker_url, clock, hours, stop, totals, on_sent), name="load"
    )
    driver.start()

    def wrote(hour: datetime) -> None:
        hours.put(hour)
        on_hour(hour)

    try:
        run_live(world, clock, stop, on_hour=wrote, on_tick=on_tick)
        if not stop.is_set():
            stop.wait((clock.wall_at(world.end + LAG) - datetime.now(UTC)).total_seconds() + 1.0)
    finally:
        stop.set()
        driver.join()
