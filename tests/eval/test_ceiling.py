"""The coverage ceiling: only users a run before their hour could know can be fed by any tier."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pytest

from solaris.data.eventlog import EventLog, building, write_event_log
from solaris.data.schema import IMPRESSIONS, REQUESTS
from solaris.eval.ceiling import known_user_share
from solaris.models.splits import Span

T0 = datetime(2026, 11, 2, 0, tzinfo=UTC)
H = timedelta(hours=1)


def _log(target: Path, requests: list[tuple[datetime, int, int]], signups: dict[int, datetime | None]) -> EventLog:
    """(ts, user, impressions shown) per request; users with a ``signup_ts`` (None: unknown)."""
    rows = [(i, ts, user) for i, (ts, user, shown) in enumerate(requests) for _ in range(shown)]
    impressions = pa.table(
        {
            "request_id": [r[0] for r in rows],
            "ts": [r[1] for r in rows],
            "user_id": [r[2] for r in rows],
            "item_id": [7] * len(rows),
            "position": list(range(len(rows))),
            "click": [0] * len(rows),
            "conversion": [0] * len(rows),
        },
        schema=IMPRESSIONS,
    )
    table = pa.table(
        {
            "request_id": list(range(len(requests))),
            "ts": [r[0] for r in requests],
            "user_id": [r[1] for r in requests],
            "candidates": [[7]] * len(requests),
        },
        schema=REQUESTS,
    )
    users = pa.table(
        {"user_id": list(signups), "signup_ts": pa.array(list(signups.values()), pa.timestamp("us", "UTC"))}
    )
    with building(target) as folder:
        meta = {"name": "t", "source": "test", "start": str(T0), "end": str(T0 + 3 * H)}
        write_event_log(folder, table, impressions, users, pa.table({"item_id": [7]}), meta)
    return EventLog(target)


def test_only_users_seen_before_their_hour_count_as_known(tmp_path: Path) -> None:
    log = _log(
        tmp_path / "log",
        [
            (T0 + timedelta(minutes=10), 1, 1),  # user 1 first requests in hour 0
            (T0 + 2 * H + timedelta(minutes=5), 1, 3),  # known in hour 2: 3 impressions
            (T0 + 2 * H + timedelta(minutes=1), 2, 2),  # user 2's first request: unknown, 2 impressions
            (T0 + 2 * H + timedelta(minutes=9), 2, 1),  # again in the same hour: still unknown to the run
            (T0 + 2 * H + timedelta(minutes=2), 3, 4),  # user 3 signed up the hour before: known
            (T0 + 2 * H + timedelta(minutes=3), 4, 5),  # user 4 signed up inside the hour: unknown
        ],
        {1: None, 2: None, 3: T0 + H + timedelta(minutes=30), 4: T0 + 2 * H},
    )
    assert known_user_share(log, Span(T0 + 2 * H, T0 + 3 * H)) == pytest.approx((3 + 4) / (3 + 2 + 1 + 4 + 5))
    assert known_user_share(log, Span(T0, T0 + H)) == 0.0  # everyone's first hour
    assert known_user_share(log, Span(T0 + H, T0 + 2 * H)) is None  # nothing shown
