"""The features as served survive a stop: SIGTERM to the service's process group (`solaris stack down`)
flushes every answered request's rows and exits promptly; a writer whose parent was killed still writes what
it holds and exits; a failed write shows in /metrics while the service runs."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
import time
from datetime import timedelta
from pathlib import Path

import httpx
import numpy as np
import psutil
from conftest import T, Layout
from fastapi.testclient import TestClient
from serve_process import laid_out_settings, start_serve

from solaris.config import Settings
from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.champion import ServingModel
from solaris.models.features import BASE_COLUMNS, TIERS
from solaris.serving.servedlog import ServedBatch, ServedLog, read_served
from solaris.training.jobs import TrainReport, World

EXIT_S = 30.0


def gone(pid: int) -> bool:
    try:
        return psutil.Process(pid).status() == psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return True


def test_sigterm_to_the_group_keeps_every_answered_row_and_exits_promptly(
    trained: tuple[Settings, World, TrainReport], champion: ServingModel, tmp_path: Path
) -> None:
    settings = laid_out_settings(trained[0], champion, tmp_path)
    server, base = start_serve(settings, "--workers", "1")
    n = 24
    try:
        with httpx.Client(base_url=base) as client:
            for request_id in range(n):
                body = {"user_id": 1, "items": [10, 11, 12], "at": T.isoformat(), "request_id": request_id}
                answer = client.post("/rank", json=body)
                assert answer.status_code == 200
        members = [server.pid, *(c.pid for c in psutil.Process(server.pid).children(recursive=True))]
        os.killpg(server.pid, signal.SIGTERM)  # what `solaris stack down` does
        server.wait(timeout=EXIT_S)
        deadline = time.monotonic() + 5
        while not all(gone(pid) for pid in members) and time.monotonic() < deadline:
            time.sleep(0.1)
        assert all(gone(pid) for pid in members), "a process of the service outlived it"
    finally:
        try:
            os.killpg(server.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        server.wait(timeout=10)
    rows = read_served(settings.data_dir / "served", T - timedelta(hours=1), T + timedelta(hours=1), champion.code_dim)
    assert rows.num_rows == 3 * n
    assert sorted(set(rows["request_id"].to_pylist())) == list(range(n))


ORPHAN = textwrap.dedent(
    """
    import sys, time
    from pathlib import Path
    import numpy as np
    from solaris.models.features import BASE_COLUMNS, TIERS
    from solaris.serving.servedlog import ServedBatch, ServedLog

    DIM = 4

    def batch(request_id):
        inputs = np.zeros((3, len(BASE_COLUMNS) + len(TIERS) * (DIM + 1)), np.float32)
        inputs[:, 0], inputs[:, 1] = 1, [10, 11, 12]
        ts = np.full(3, int(sys.argv[2]))
        return ServedBatch(inputs, np.zeros(3, np.float32), np.zeros(3, np.int8), ts, np.full(3, request_id), "vm", "e", DIM)

    log = ServedLog(Path(sys.argv[1]), child_process=True)
    log.log(batch(1))
    log.flush()  # the writer is up
    log.log(batch(2))
    time.sleep(1.0)  # handed to the writer's pipe
    print(log.pid, flush=True)
    time.sleep(600)
    """
)


def test_a_writer_whose_parent_was_killed_writes_what_it_holds_and_exits(tmp_path: Path) -> None:
    folder = tmp_path / "served"
    ts_us = int(T.timestamp() * 1_000_000)
    parent = subprocess.Popen(
        [sys.executable, "-c", ORPHAN, str(folder), str(ts_us)], stdout=subprocess.PIPE, text=True
    )
    try:
        child = int(parent.stdout.readline())
        parent.kill()
        parent.wait(timeout=10)
        deadline = time.monotonic() + 15
        while not gone(child) and time.monotonic() < deadline:
            time.sleep(0.1)
        lingering = not gone(child)
        if lingering:
            os.kill(child, signal.SIGKILL)
        assert not lingering, "the writer outlived its parent by 15 s"
    finally:
        parent.kill()
        parent.wait(timeout=10)
    rows = read_served(folder, T - timedelta(hours=1), T + timedelta(hours=1), 4)
    assert sorted(rows["request_id"].to_pylist()) == [1, 1, 1, 2, 2, 2]


def synthetic_batch(request_id: int, dim: int = 4) -> ServedBatch:
    inputs = np.zeros((3, len(BASE_COLUMNS) + len(TIERS) * (dim + 1)), np.float32)
    inputs[:, 0], inputs[:, 1] = 1, [10, 11, 12]
    ts = np.full(3, int(T.timestamp() * 1_000_000))
    return ServedBatch(inputs, np.zeros(3, np.float32), np.zeros(3, np.int8), ts, np.full(3, request_id), "vm", "e", dim)


def test_a_writer_process_outlives_a_sigterm_even_while_it_starts(tmp_path: Path) -> None:
    log = ServedLog(tmp_path / "served", child_process=True)
    os.kill(log.pid, signal.SIGTERM)  # the group's stop signals, before the child has even imported anything
    os.kill(log.pid, signal.SIGINT)
    log.log(synthetic_batch(3))
    log.close()  # flushes: the writer is still there
    rows = read_served(tmp_path / "served", T - timedelta(hours=1), T + timedelta(hours=1), 4)
    assert rows["request_id"].to_pylist() == [3, 3, 3]


def failures(metrics: str) -> float:
    lines = [line for line in metrics.splitlines() if line.startswith("solaris_served_log_write_failures_total ")]
    return float(lines[0].split()[-1]) if lines else 0.0


def test_a_failed_write_shows_in_metrics_while_serving(layout: Layout, champion: ServingModel, tmp_path: Path) -> None:
    blocked = tmp_path / "served"
    blocked.write_text("a file where the log's folder should be")
    config = ServiceConfig(poll_seconds=3600, served_log_dir=blocked, served_log_flush_rows=1)  # every batch a write
    service = build_service(layout.store, champion, config)
    with TestClient(create_app(service, config)) as client:
        assert failures(client.get("/metrics").text) == 0
        assert client.post("/rank", json={"user_id": 1, "items": [10, 11], "at": T.isoformat()}).status_code == 200
        deadline = time.monotonic() + 20
        while (seen := failures(client.get("/metrics").text)) == 0 and time.monotonic() < deadline:
            time.sleep(0.1)
        assert seen == 1
        log = service.ranker.served_log
        service.ranker.served_log = None  # the lifespan's close would raise the reported failure again
    try:
        log.close()
    except Exception:
        pass
