"""A live stack's clock and traffic service, decided before anything starts, and the traffic's health check."""

from __future__ import annotations

import json
import os
import time
from datetime import UTC, datetime
from pathlib import Path

import pytest

from solaris.config import Settings
from solaris.data.synthetic.config import PRESETS
from solaris.data.synthetic.world import generate_world
from solaris.live.clock import CLOCK_ENV, HOUR, LiveClock
from solaris.ops.health import HEARTBEAT_S, Check, probe
from solaris.ops.stack import StackConfig, StackError, _traffic, live_clock

WORLD = PRESETS["tiny"].with_overrides(n_users=100, days=2)
WALL = datetime(2026, 12, 3, 17, tzinfo=UTC)


def test_a_live_stack_resumes_simulated_time_at_the_worlds_end(settings: Settings) -> None:
    generate_world(WORLD, settings.world_dir(), hours=30)
    clock = live_clock(settings, StackConfig(live=True, hour_seconds=20), WALL)
    assert clock == LiveClock(WORLD.start + 30 * HOUR, WALL, 20)
    service = _traffic(settings, clock, "http://127.0.0.1:8000")
    assert service.argv[1:4] == ["data", "live", "--heartbeat"] and service.argv[5:] == [
        "--ranker",
        "http://127.0.0.1:8000",
    ]
    assert LiveClock.from_json(service.env[CLOCK_ENV]) == clock
    assert service.env["SOLARIS_WORLD"] == settings.world
    assert service.check.url == f"file://{service.argv[4]}"


@pytest.mark.parametrize(
    ("hours", "hour_seconds", "named"),
    [
        (None, 20, "cannot run live: .* is not an event log"),
        (48, 20, "has no hours left to continue"),
        (30, 0.5, "hour_seconds must be at least 1"),
    ],
)
def test_a_stack_that_cannot_run_live_is_refused_naming_the_fix(
    settings: Settings, hours: int | None, hour_seconds: float, named: str
) -> None:
    if hours is not None:
        generate_world(WORLD, settings.world_dir(), hours=hours)
    with pytest.raises(StackError, match=named):
        live_clock(settings, StackConfig(live=True, hour_seconds=hour_seconds), WALL)


def test_an_imported_log_cannot_run_live(settings: Settings) -> None:
    log = generate_world(WORLD, settings.world_dir(), hours=30)
    (log.root / "meta.json").write_text(json.dumps(log.meta | {"source": "movielens"}))
    with pytest.raises(StackError, match="only a generated world continues"):
        live_clock(settings, StackConfig(live=True), WALL)


def test_a_heartbeat_check_passes_only_while_the_file_is_fresh(tmp_path: Path) -> None:
    beat = tmp_path / "traffic.heartbeat"
    check = Check(f"file://{beat}")
    assert not probe(check)  # not started
    beat.touch()
    assert probe(check)
    stale = time.time() - HEARTBEAT_S - 5
    os.utime(beat, (stale, stale))
    assert not probe(check)  # alive, but no longer looking at the clock
