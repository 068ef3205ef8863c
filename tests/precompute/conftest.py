"""Small hand-built event logs for the precompute tests."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pytest

from solaris.data.eventlog import EventLog, building, write_event_log
from solaris.data.schema import IMPRESSIONS, REQUESTS

T0 = datetime(2026, 11, 2, 0, tzinfo=UTC)

# (ts, user_id, candidates)
Request = tuple[datetime, int, Sequence[int]]
LogFactory = Callable[[Sequence[Request]], EventLog]


@pytest.fixture
def make_log(tmp_path: Path) -> LogFactory:
    """Build an event log holding exactly ``requests`` (request ids in the given order)."""
    counter = iter(range(1000))

    def make(requests: Sequence[Request]) -> EventLog:
        table = pa.table(
            {
                "request_id": list(range(len(requests))),
                "ts": [r[0] for r in requests],
                "user_id": [r[1] for r in requests],
                "candidates": [list(r[2]) for r in requests],
            },
            schema=REQUESTS,
        )
        users = pa.table({"user_id": sorted({r[1] for r in requests})})
        items = pa.table({"item_id": sorted({i for r in requests for i in r[2]})})
        target = tmp_path / f"log{next(counter)}"
        times = [r[0] for r in requests]
        with building(target) as folder:
            write_event_log(
                folder,
                table,
                IMPRESSIONS.empty_table(),
                users,
                items,
                {"name": target.name, "source": "test", "start": str(min(times)), "end": str(max(times))},
            )
        return EventLog(target)

    return make
