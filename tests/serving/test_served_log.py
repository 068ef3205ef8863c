"""Features as served: what the ranker fed the VM comes back from the hour-partitioned log unchanged."""

from __future__ import annotations

import os
import queue
import signal
import threading
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from conftest import Layout, T

from solaris import exposure
from solaris.models.features import TIERS, VM_BASE_COLUMNS
from solaris.serving import Ranker, servedlog
from solaris.serving.champion import ServingModel
from solaris.serving.servedlog import ServedBatch, ServedLog, ServedLogError, read_served, served_codes

HOSTS = {"thread": False, "child process": True}


@pytest.mark.parametrize("host", HOSTS)
def test_served_rows_round_trip_by_hour(layout: Layout, champion: ServingModel, tmp_path: Path, host: str) -> None:
    log = ServedLog(tmp_path / "served", child_process=HOSTS[host])
    ranker = Ranker(layout.store, champion, served_log=log)
    first = ranker.rank(1, np.array([10, 11]), T, request_id=7)
    second = ranker.rank(2, np.array([20, 30]), T + timedelta(hours=1, minutes=5), request_id=8)
    ranker.close()

    hour_one = read_served(
        tmp_path / "served", T.replace(minute=0), T.replace(minute=0) + timedelta(hours=1), champion.code_dim
    )
    everything = read_served(tmp_path / "served", T - timedelta(hours=1), T + timedelta(hours=3), champion.code_dim)
    assert hour_one["request_id"].to_pylist() == [7, 7] and everything.num_rows == 4

    rows = everything.sort_by("ts")
    np.testing.assert_array_equal(rows["score"].to_numpy(), np.r_[first.scores, second.scores])
    np.testing.assert_array_equal(rows["tier"].to_numpy(), np.r_[first.tiers, second.tiers])
    inputs = np.vstack([first.inputs, second.inputs])
    for k, name in enumerate(exposure.columns(), start=len(VM_BASE_COLUMNS) - len(exposure.columns())):
        np.testing.assert_array_equal(rows[name].to_numpy(), inputs[:, k])  # the counters as the VM saw them
    offset = len(VM_BASE_COLUMNS)
    for tier in TIERS:
        np.testing.assert_array_equal(served_codes(rows, tier), inputs[:, offset : offset + champion.code_dim])
        np.testing.assert_array_equal(rows[f"{tier}_flag"].to_numpy(), inputs[:, offset + champion.code_dim])
        offset += champion.code_dim + 1
    assert set(rows["vm_version"].to_pylist()) == {champion.pinned.vm}


def test_a_full_queue_drops_and_counts_instead_of_blocking(
    layout: Layout, champion: ServingModel, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    disk_free = threading.Event()
    monkeypatch.setattr(servedlog, "write_hourly", lambda *args, **kwargs: disk_free.wait())  # a stuck disk
    log = ServedLog(tmp_path / "served", flush_rows=1, max_pending=1)
    ranker = Ranker(layout.store, champion, served_log=log)
    ranker.rank(1, np.array([10]), T)  # the writer takes it and sticks in the write
    deadline = time.monotonic() + 10
    while not log._batches.empty() and time.monotonic() < deadline:  # noqa: SLF001
        time.sleep(0.01)
    ranker.rank(1, np.array([11]), T)  # fills the queue
    served = ranker.rank(1, np.array([10, 11, 12]), T)

    assert log.dropped_rows == 3 and len(served.scores) == 3
    disk_free.set()
    ranker.close()


def test_a_stopped_writer_process_drops_and_counts_then_catches_up(
    layout: Layout, champion: ServingModel, tmp_path: Path
) -> None:
    log = ServedLog(tmp_path / "served", max_pending=2, child_process=True)
    ranker = Ranker(layout.store, champion, served_log=log)
    ranker.rank(1, np.array([10]), T, request_id=1)
    log.flush()  # the child is up and has written the first row
    os.kill(log.pid, signal.SIGSTOP)  # a writer that gets no CPU
    try:
        for request in range(2, 12):
            ranker.rank(1, np.array([10, 11]), T, request_id=request)
        assert 0 < log.dropped_rows <= 18  # 10 requests of 2 rows; at most the queue's 2 batches (+1 in flight) kept
    finally:
        os.kill(log.pid, signal.SIGCONT)
    ranker.close()
    written = read_served(tmp_path / "served", T - timedelta(hours=1), T + timedelta(hours=1), champion.code_dim)
    assert written.num_rows == 1 + 20 - log.dropped_rows


@pytest.mark.parametrize("host", HOSTS)
def test_a_failed_write_is_raised_at_the_next_flush(
    layout: Layout, champion: ServingModel, tmp_path: Path, host: str
) -> None:
    blocked = tmp_path / "served"
    blocked.write_text("a file where the log's folder should be")
    log = ServedLog(blocked, child_process=HOSTS[host])
    Ranker(layout.store, champion, served_log=log).rank(1, np.array([10]), T)
    with pytest.raises(ServedLogError, match="served log writer failed: .*Error"):
        log.flush()
    log.flush()  # reported once; nothing pending since
    log.close()


def test_a_dead_writer_process_is_an_error_not_a_hang(tmp_path: Path) -> None:
    log = ServedLog(tmp_path / "served", child_process=True)
    os.kill(log.pid, signal.SIGKILL)
    with pytest.raises(ServedLogError, match="died"):
        log.flush()


@pytest.mark.parametrize("host", HOSTS)
def test_a_batch_after_close_is_dropped_and_counted(
    layout: Layout, champion: ServingModel, tmp_path: Path, host: str
) -> None:
    log = ServedLog(tmp_path / "served", child_process=HOSTS[host])
    ranker = Ranker(layout.store, champion, served_log=log)
    ranker.close()
    log.close()  # twice is harmless
    served = ranker.rank(1, np.array([10, 11]), T)  # a request racing the shutdown still gets its answer
    assert len(served.scores) == 2 and log.dropped_rows == 2


def test_batches_built_together_keep_each_kind_and_a_bad_batch_loses_only_its_rows(tmp_path: Path) -> None:
    dim = 4

    def batch(
        request_id: int | None, vm: str, width: int = len(VM_BASE_COLUMNS) + len(TIERS) * (dim + 1)
    ) -> ServedBatch:
        inputs = np.zeros((2, width), np.float32)
        inputs[:, 0], inputs[:, 1] = 1, [10, 11]
        ids = None if request_id is None else np.full(2, request_id)
        ts = np.full(2, int(T.timestamp() * 1_000_000))
        return ServedBatch(inputs, np.zeros(2, np.float32), np.zeros(2, np.int8), ts, ids, vm, "e", dim)

    batches, replies = queue.Queue(), queue.Queue()
    for item in (batch(1, "vm-a"), batch(2, "vm-a"), batch(3, "vm-a", width=5), batch(None, "vm-a"), batch(4, "vm-b")):
        batches.put(item)
    for item in (servedlog.FLUSH, servedlog.STOP):
        batches.put(item)
    servedlog.write_loop(batches, replies, tmp_path / "served", flush_rows=100_000)

    rows = read_served(tmp_path / "served", T - timedelta(hours=1), T + timedelta(hours=1), dim)
    written = sorted(zip(rows["request_id"].to_pylist(), rows["vm_version"].to_pylist(), strict=True), key=str)
    assert written == sorted([(1, "vm-a")] * 2 + [(2, "vm-a")] * 2 + [(None, "vm-a")] * 2 + [(4, "vm-b")] * 2, key=str)
    failure, flushed = replies.get_nowait(), replies.get_nowait()
    assert failure[0] == servedlog.FAILED and "shape" in failure[1] and flushed[0] == servedlog.FLUSHED
