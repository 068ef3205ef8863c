"""Live traffic continues a world exactly as one generation of the same span would have written it."""

import dataclasses
import json
import threading
from datetime import datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from solaris.data.eventlog import EventLog
from solaris.data.synthetic.config import PRESETS, WorldConfig
from solaris.data.synthetic.world import generate_world
from solaris.live.clock import HOUR, LiveClock
from solaris.live.traffic import HorizonReached, LiveWorld, run_live

WORLD = PRESETS["tiny"].with_overrides(n_users=200, days=2)


@pytest.fixture(scope="module")
def whole(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return generate_world(WORLD, tmp_path_factory.mktemp("whole") / "world")


def hours_of(log: EventLog, start: datetime, end: datetime) -> tuple[pa.Table, pa.Table]:
    return log.requests(start, end), log.impressions(start, end)


def test_a_prefix_continued_hour_by_hour_is_the_whole_world(whole: EventLog, tmp_path: Path) -> None:
    prefix = generate_world(WORLD, tmp_path / "world", hours=30)
    assert (prefix.end, prefix.meta["hours"], prefix.meta["horizon_hours"]) == (WORLD.start + 30 * HOUR, 30, 48)
    live = LiveWorld(prefix.root)
    assert live.end == prefix.end
    for k in range(18):
        assert live.write_next() == WORLD.start + (30 + k) * HOUR
    for got, want in zip(
        hours_of(prefix, WORLD.start, live.horizon), hours_of(whole, WORLD.start, live.horizon), strict=True
    ):
        assert got.num_rows > 0 and got.equals(want)
    meta, full = prefix.meta, whole.meta
    assert (meta["end"], meta["hours"], meta["counts"]) == (full["end"], full["hours"], full["counts"])
    assert meta["ne"] == full["ne"]
    with pytest.raises(HorizonReached, match="horizon"):
        live.write_next()


def test_a_live_world_reopened_continues_where_its_log_ends(whole: EventLog, tmp_path: Path) -> None:
    prefix = generate_world(WORLD, tmp_path / "world", hours=40)
    LiveWorld(prefix.root).write_next()
    reopened = LiveWorld(prefix.root)  # e.g. the simulator process restarted
    assert reopened.end == WORLD.start + 41 * HOUR
    hour = reopened.write_next()
    assert hours_of(prefix, hour, hour + HOUR)[1].equals(hours_of(whole, hour, hour + HOUR)[1])


def test_hours_are_written_as_the_clock_passes_their_end(tmp_path: Path) -> None:
    prefix = generate_world(WORLD, tmp_path / "world", hours=24)
    live = LiveWorld(prefix.root)
    clock = LiveClock(live.end, datetime(2026, 12, 3, 12, tzinfo=prefix.start.tzinfo), hour_seconds=10)
    assert live.write_due(clock, clock.wall_at(live.end + timedelta(minutes=59))) == []  # the hour is not over
    written = live.write_due(clock, clock.wall_at(live.end + timedelta(hours=2, minutes=30)))
    assert written == [WORLD.start + 24 * HOUR, WORLD.start + 25 * HOUR]
    assert EventLog(prefix.root).end == WORLD.start + 26 * HOUR
    assert live.write_due(clock, clock.wall_at(live.horizon + timedelta(days=3))) == [
        WORLD.start + h * HOUR for h in range(26, 48)
    ]  # never past the horizon


def test_the_loop_writes_what_is_due_and_stops_when_asked(tmp_path: Path) -> None:
    live = LiveWorld(generate_world(WORLD, tmp_path / "world", hours=24).root)
    clock = LiveClock(live.end, datetime(2026, 12, 3, 12, tzinfo=WORLD.start.tzinfo), hour_seconds=10)
    stop, seen = threading.Event(), []
    now = clock.wall_at(live.end + timedelta(hours=3, minutes=1))

    def on_hour(hour: datetime) -> None:
        seen.append(hour)
        if len(seen) == 3:
            stop.set()

    run_live(live, clock, stop, wall_now=lambda: now, on_hour=on_hour)
    assert seen == [WORLD.start + h * HOUR for h in (24, 25, 26)]


def test_only_a_generated_world_can_run_live(tmp_path: Path) -> None:
    log = generate_world(WORLD, tmp_path / "world", hours=24)
    meta = log.meta | {"source": "movielens"}
    (log.root / "meta.json").write_text(json.dumps(meta))
    with pytest.raises(ValueError, match="only a generated"):
        LiveWorld(log.root)


def test_a_world_config_survives_its_trip_through_meta_json() -> None:
    churn = PRESETS["churn"]
    stored = json.loads(json.dumps({**dataclasses.asdict(churn), "start": churn.start.isoformat()}))
    assert WorldConfig.from_dict(stored) == churn
    with pytest.raises(ValueError, match="not a world config"):
        WorldConfig.from_dict({"name": "x"})


def test_a_prefix_longer_than_the_world_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="hours=49 must lie in"):
        generate_world(WORLD, tmp_path / "world", hours=49)
