"""The time split: ordered, contiguous, covering the log, every split at least one hour."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.models.splits import SPLITS, TimeSplit

START = datetime(2026, 1, 5, tzinfo=UTC)


def log_of(tmp_path: Path, hours: int) -> EventLog:
    end = START + hours * HOUR
    (tmp_path / "meta.json").write_text(json.dumps({"start": START.isoformat(), "end": end.isoformat()}))
    return EventLog(tmp_path)


@pytest.mark.parametrize("hours", [4, 5, 48, 120])
def test_splits_tile_the_log_in_time_order(tmp_path: Path, hours: int) -> None:
    split = TimeSplit.from_log(log_of(tmp_path, hours))
    spans = [getattr(split, name) for name in SPLITS]
    assert spans[0].start == START and spans[-1].end == START + hours * HOUR
    assert all(a.end == b.start for a, b in zip(spans[:-1], spans[1:], strict=True))
    assert all(s.hours >= 1 for s in spans)


def test_default_shares_on_two_days(tmp_path: Path) -> None:
    split = TimeSplit.from_log(log_of(tmp_path, 48))
    assert [getattr(split, n).hours for n in SPLITS] == [round(0.55 * 48), 38 - 26, 42 - 38, 48 - 42]


def test_too_short_a_log_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="spans 3 hours; a time split needs 4"):
        TimeSplit.from_log(log_of(tmp_path, 3))
