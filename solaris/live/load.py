"""The load driver: the live traffic's requests sent to the ranker, so features as served accumulate as in
production.

An hour's requests exist once the hour is over (:mod:`.traffic` writes it then), so each request is sent one
simulated hour after its own time, at the wall time the clock gives that, with ``at`` its own time: the ranker
reads the store as of the request, the pacing follows the clock. A ranker that is not ready (503: no champion
yet) or fails is counted, never waited for: traffic goes on.
"""

from __future__ import annotations

import json
import logging
import queue
import threading
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa

from solaris.data.eventlog import EventLog
from solaris.live.clock import HOUR, LiveClock

logger = logging.getLogger(__name__)
LAG = HOUR  # a request goes out this long (simulated) after its time: when its hour has been written
TIMEOUT_S = 5.0

Post = Callable[[str, bytes], int]  # (url, JSON body) -> HTTP status


@dataclass
class LoadStats:
    """Requests sent and how the ranker answered; an hour's also keeps each answer's round trip."""

    sent: int = 0
    answered: int = 0  # 200
    not_ready: int = 0  # 503: the ranker has no champion yet
    failed: int = 0  # any other status, or no answer
    answer_seconds: list[float] = field(default_factory=list)

    def count(self, status: int, seconds: float) -> None:
        self.sent += 1
        if status == 200:
            self.answered += 1
            self.answer_seconds.append(seconds)
        elif status == 503:
            self.not_ready += 1
        else:
            self.failed += 1

    def add_counts(self, hour: LoadStats) -> None:
        """Adds an hour's counts to these totals; round trips stay with their hour (totals run for days)."""
        self.sent, self.answered = self.sent + hour.sent, self.answered + hour.answered
        self.not_ready, self.failed = self.not_ready + hour.not_ready, self.failed + hour.failed

    def figures(self) -> dict[str, float | int | None]:
        """The counts, and the ranker's p50 and p99 round trip in ms as the load driver saw them."""
        answered = np.asarray(self.answer_seconds) * 1000.0
        p50, p99 = np.percentile(answered, [50, 99]).tolist() if len(answered) else (None, None)
        counts = {"sent": self.sent, "answered": self.answered, "not_ready": self.not_ready, "failed": self.failed}
        return counts | {"ranker_p50_ms": p50, "ranker_p99_ms": p99}


def rank_bodies(requests: pa.Table) -> Iterator[tuple[datetime, dict[str, object]]]:
    """Each request's time and its /rank body: the candidates as retrieval passed them (the first of any
    repeated id: the API refuses duplicates), ``at`` its own time."""
    ts = requests["ts"].to_pylist()
    for k, (request_id, user, candidates) in enumerate(
        zip(
            requests["request_id"].to_pylist(),
            requests["user_id"].to_pylist(),
            requests["candidates"].to_pylist(),
            strict=True,
        )
    ):
        items = np.asarray(candidates, np.int64)
        distinct = items[np.sort(np.unique(items, return_index=True)[1])]
        at = ts[k].astimezone(UTC)
        yield at, {"user_id": user, "items": distinct.tolist(), "request_id": request_id, "at": at.isoformat()}


def http_post(url: str, body: bytes) -> int:
    request = urllib.request.Request(url, data=body, method="POST", headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(request, timeout=TIMEOUT_S) as answer:  # noqa: S310 (the stack's own ranker)
            return answer.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def send_hour(
    ranker_url: str,
    requests: pa.Table,
    clock: LiveClock,
    wait_until: Callable[[datetime], bool],
    post: Post = http_post,
    timer: Callable[[], float] = time.perf_counter,
) -> tuple[LoadStats, bool]:
    """Send one hour's requests in time order, each when the clock reaches its time plus ``LAG``; returns
    the answers counted and whether every request went out (``wait_until`` returns False at a stop)."""
    url, stats = f"{ranker_url.rstrip('/')}/rank", LoadStats()
    for at, body in sorted(rank_bodies(requests), key=lambda pair: pair[0]):
        if not wait_until(clock.wall_at(at + LAG)):
            return stats, False
        started = timer()
        status = post(url, json.dumps(body).encode())
        stats.count(status, timer() - started)
        if status not in (200, 503):
            logger.warning("the ranker answered %s to request %s", status, body["request_id"])
    return stats, True


def wait_until_with(stop_wait: Callable[[float], bool], wall_now: Callable[[], datetime]) -> Callable[[datetime], bool]:
    """``wait_until`` on a stop event's ``wait`` (True once stopped) and a wall clock."""

    def wait_until(due: datetime) -> bool:
        return not stop_wait(max((due - wall_now()) / timedelta(seconds=1), 0.0))

    return wait_until


def drive_load(
    log: EventLog,
    ranker_url: str,
    clock: LiveClock,
    hours: queue.Queue[datetime],
    stop: threading.Event,
    totals: LoadStats,
    on_sent: Callable[[datetime, LoadStats], None] = lambda hour, stats: None,
    wall_now: Callable[[], datetime] = lambda: datetime.now(UTC),
) -> None:
    """Send each hour the traffic writes (``hours``, in order) until ``stop``: run beside :func:`.traffic.run_live`.
    ``on_sent`` gets the figures of each hour sent whole."""
    wait_until = wait_until_with(stop.wait, wall_now)
    while not stop.is_set():
        try:
            hour = hours.get(timeout=1.0)
        except queue.Empty:
            continue
        sent, whole = send_hour(ranker_url, log.requests(hour, hour + HOUR), clock, wait_until)
        totals.add_counts(sent)
        if whole:
            on_sent(hour, sent)
