"""Small hand-built event logs for the precompute tests (a module with a unique name, importable by tests)."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa

from solaris.data.eventlog import EventLog, building, write_event_log
from solaris.data.schema import IMPRESSIONS, REQUESTS

T0 = datetime(2026, 11, 2, 0, tzinfo=UTC)

# (ts, user_id, candidates)
Request = tuple[datetime, int, Sequence[int]]
LogFactory = Callable[[Sequence[Request]], EventLog]


def build_log(target: Path, requests: Sequence[Request]) -> EventLog:
    """An event log at ``target`` holding exactly ``requests`` (request ids in the given order)."""
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
    times = [r[0] for r in requests]
    with building(target) as folder:
        meta = {"name": target.name, "source": "test", "start": str(min(times)), "end": str(max(times))}
        write_event_log(folder, table, IMPRESSIONS.empty_table(), users, items, meta)
    return EventLog(target)
