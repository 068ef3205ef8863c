"""The load driver sends every request of a live hour to the ranker, one simulated hour after its time."""

from __future__ import annotations

import json
import threading
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from pathlib import Path

import pyarrow as pa
import pytest

from solaris.data.schema import REQUESTS
from solaris.data.synthetic.config import PRESETS
from solaris.data.synthetic.world import generate_world
from solaris.live.clock import HOUR, LiveClock
from solaris.live.load import LAG, LoadStats, http_post, rank_bodies, send_hour
from solaris.live.traffic import LiveWorld, run_with_load

SIM = datetime(2026, 1, 6, tzinfo=UTC)
CLOCK = LiveClock(SIM, datetime(2026, 12, 3, 12, tzinfo=UTC), hour_seconds=10)


def requests_table() -> pa.Table:
    ts = [SIM + timedelta(minutes=m) for m in (40, 5, 20)]
    return pa.table(
        {"request_id": [7, 8, 9], "ts": ts, "user_id": [1, 2, 3], "candidates": [[4, 5, 4, 6], [9], [3, 2, 1]]},
        schema=REQUESTS,
    )


def test_each_request_becomes_a_rank_body_as_of_its_own_time() -> None:
    bodies = list(rank_bodies(requests_table()))
    assert bodies[0] == (
        SIM + timedelta(minutes=40),
        {
            "user_id": 1,
            "items": [4, 5, 6],
            "request_id": 7,
            "at": (SIM + timedelta(minutes=40)).isoformat(),
        },
    )  # a repeated candidate once: the API refuses duplicates


def test_an_hour_is_sent_in_time_order_each_request_when_the_clock_reaches_it_plus_the_lag() -> None:
    sent, due = [], []
    statuses = iter([200, 503, 500])
    ticks = iter([0.0, 0.25, 1.0, 1.5, 2.0, 2.125])  # the timer before and after each post

    def post(url: str, body: bytes) -> int:
        sent.append((url, json.loads(body)["request_id"]))
        return next(statuses)

    stats, whole = send_hour(
        "http://ranker:8000/", requests_table(), CLOCK, lambda at: due.append(at) or True, post, lambda: next(ticks)
    )
    assert whole and [r for _, r in sent] == [8, 9, 7] and {u for u, _ in sent} == {"http://ranker:8000/rank"}
    assert due == [CLOCK.wall_at(SIM + timedelta(minutes=m) + LAG) for m in (5, 20, 40)]
    assert stats.figures() == {
        "sent": 3,
        "answered": 1,
        "not_ready": 1,
        "failed": 1,
        "ranker_p50_ms": 250.0,
        "ranker_p99_ms": 250.0,
    }  # only the answered request's round trip


def test_an_hours_figures_are_percentiles_of_its_round_trips_and_totals_keep_only_counts() -> None:
    hour, totals = LoadStats(), LoadStats()
    for ms in range(1, 101):
        hour.count(200, ms / 1000)
    hour.count(0, 9.0)
    totals.add_counts(hour)
    totals.add_counts(hour)
    figures = hour.figures()
    assert figures["ranker_p50_ms"] == pytest.approx(50.5) and figures["ranker_p99_ms"] == pytest.approx(99.01)
    assert (totals.sent, totals.answered, totals.failed, totals.answer_seconds) == (202, 200, 2, [])
    assert LoadStats().figures()["ranker_p99_ms"] is None


def test_a_stop_while_waiting_sends_nothing_more() -> None:
    sent = []
    waits = iter([True, False])
    stats, whole = send_hour(
        "http://ranker", requests_table(), CLOCK, lambda at: next(waits), lambda u, b: sent.append(b) or 200
    )
    assert len(sent) == 1 and stats.sent == 1 and not whole


class Recorder(BaseHTTPRequestHandler):
    bodies: list[dict] = []

    def do_POST(self) -> None:  # noqa: N802 (http.server's name)
        Recorder.bodies.append(json.loads(self.rfile.read(int(self.headers["Content-Length"]))))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *args: object) -> None:
        pass


def test_a_generated_hour_reaches_a_server_over_http_whole(tmp_path: Path) -> None:
    log = generate_world(PRESETS["tiny"].with_overrides(n_users=100, days=2), tmp_path / "world", hours=30)
    hour = log.end - HOUR
    requests = log.requests(hour, log.end)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        clock = LiveClock(log.end, datetime.now(UTC), 10)
        stats, _ = send_hour(f"http://127.0.0.1:{server.server_port}", requests, clock, lambda at: True, http_post)
    finally:
        server.shutdown()
    assert requests.num_rows > 0 and stats.answered == requests.num_rows
    assert sorted(b["request_id"] for b in Recorder.bodies) == sorted(requests["request_id"].to_pylist())
    assert all(hour <= datetime.fromisoformat(b["at"]) < log.end for b in Recorder.bodies)


def test_live_traffic_with_its_load_driver_sends_every_hour_it_writes_up_to_the_horizon(tmp_path: Path) -> None:
    """On a real clock (2 s per hour): the last two hours of the world written, then their requests sent, the
    last hour's a LAG after the horizon, before the run returns."""
    world = LiveWorld(
        generate_world(PRESETS["tiny"].with_overrides(n_users=100, days=2), tmp_path / "w", hours=46).root
    )
    clock = LiveClock(world.end, datetime.now(UTC), hour_seconds=2)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Recorder)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    stats, written, figures = LoadStats(), [], {}
    try:
        url = f"http://127.0.0.1:{server.server_port}"
        run_with_load(
            world, clock, threading.Event(), url, stats, written.append, on_sent=lambda h, s: figures.update({h: s})
        )
    finally:
        server.shutdown()
    assert datetime.now(UTC) >= clock.wall_at(world.horizon + LAG)  # not stopped at the horizon
    requests = world.log.requests(written[0], world.horizon)
    assert written == [world.horizon - 2 * HOUR, world.horizon - HOUR] == list(figures)
    assert stats.answered == requests.num_rows > 0
    assert [figures[h].answered for h in written] == [world.log.requests(h, h + HOUR).num_rows for h in written]
    assert sorted(b["request_id"] for b in Recorder.bodies) == sorted(requests["request_id"].to_pylist())


def test_no_answer_counts_as_failed_not_as_an_exception() -> None:
    assert http_post("http://127.0.0.1:9/rank", b"{}") == 0  # discard port: nothing listens


@pytest.fixture(autouse=True)
def _fresh_recorder() -> None:
    Recorder.bodies = []
