"""Features as served: every scored candidate with the exact tier inputs the VM saw, to hour-partitioned
Parquet. This log is the SOLARIS VM's training data, so training sees what serving saw (no skew).

Logging is off the request path: the ranker hands its arrays to a bounded queue and a writer (a thread, or
for the HTTP service a child process) builds the rows and the files; when the queue is full the batch is
dropped and counted, never waited for.
"""

from __future__ import annotations

import atexit
import itertools
import multiprocessing
import os
import queue
import signal
import threading
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa

from solaris import exposure
from solaris.data.hourly import read_range, write_hourly
from solaris.data.schema import SHOWN, TS
from solaris.models.features import TIERS, VM_BASE_COLUMNS

BatchQueue = Any  # queue.Queue in a thread, multiprocessing's Queue in a child process: the same calls


def served_schema(code_dim: int) -> pa.Schema:
    codes = pa.list_(pa.float32(), code_dim)
    tier_fields = [f for tier in TIERS for f in (pa.field(tier, codes), pa.field(f"{tier}_flag", pa.int8()))]
    return pa.schema(
        [
            pa.field("request_id", pa.int64()),
            *SHOWN,
            pa.field("score", pa.float32(), nullable=False),
            pa.field("tier", pa.int8(), nullable=False),
            pa.field("vm_version", pa.string(), nullable=False),
            pa.field("embedding_version", pa.string(), nullable=False),
            *(pa.field(name, pa.float32(), nullable=False) for name in exposure.columns()),  # log1p, as the VM saw them
            *tier_fields,
        ]
    )


def served_table(
    inputs: np.ndarray,
    scores: np.ndarray,
    tiers: np.ndarray,
    ts_us: np.ndarray,
    request_ids: np.ndarray | None,
    vm_version: str,
    embedding_version: str,
    code_dim: int,
) -> pa.Table:
    """Rows of the served log from the VM's input matrix (base columns, counters, then codes and flag per tier)."""
    n, width = len(scores), len(VM_BASE_COLUMNS) + len(TIERS) * (code_dim + 1)
    if inputs.shape != (n, width):
        raise ValueError(f"served inputs have shape {inputs.shape}, expected ({n}, {width})")
    columns: dict[str, pa.Array] = {
        "request_id": pa.array(request_ids, pa.int64()) if request_ids is not None else pa.nulls(n, pa.int64()),
        "ts": pa.array(np.asarray(ts_us, np.int64), pa.int64()).cast(TS),
        "user_id": pa.array(inputs[:, 0].astype(np.int64)),
        "item_id": pa.array(inputs[:, 1].astype(np.int64)),
        "position": pa.array(inputs[:, 3].astype(np.int16)),
        "score": pa.array(np.asarray(scores, np.float32)),
        "tier": pa.array(np.asarray(tiers, np.int8)),
        "vm_version": pa.array(np.full(n, vm_version, object), pa.string()),
        "embedding_version": pa.array(np.full(n, embedding_version, object), pa.string()),
    }
    for name in exposure.columns():
        columns[name] = pa.array(inputs[:, VM_BASE_COLUMNS.index(name)].astype(np.float32))
    offset = len(VM_BASE_COLUMNS)
    for tier in TIERS:
        codes = np.ascontiguousarray(inputs[:, offset : offset + code_dim], np.float32)
        columns[tier] = pa.FixedSizeListArray.from_arrays(pa.array(codes.ravel()), code_dim)
        columns[f"{tier}_flag"] = pa.array(inputs[:, offset + code_dim].astype(np.int8))
        offset += code_dim + 1
    return pa.table(columns, schema=served_schema(code_dim))


@dataclass(frozen=True)
class ServedBatch:
    """What one ``Ranker.serve`` scored, as the arrays it already holds (the rows are built by the writer)."""

    inputs: np.ndarray
    scores: np.ndarray
    tiers: np.ndarray
    ts_us: np.ndarray
    request_ids: np.ndarray | None
    vm_version: str
    embedding_version: str
    code_dim: int

    @property
    def rows(self) -> int:
        return len(self.scores)

    @property
    def kind(self) -> tuple[str, str, int, bool]:
        """Batches of one kind can become one table."""
        return self.vm_version, self.embedding_version, self.code_dim, self.request_ids is None


def batches_tables(batches: list[ServedBatch]) -> list[pa.Table]:
    """The rows of ``batches``, a table per run of one kind: built a batch at a time, a table's fixed cost
    (an Arrow array per column) was two thirds of building a 200-row request's (bench_serving)."""
    runs = [list(run) for _, run in itertools.groupby(batches, key=lambda batch: batch.kind)]
    return [
        served_table(
            np.concatenate([batch.inputs for batch in run]),
            np.concatenate([batch.scores for batch in run]),
            np.concatenate([batch.tiers for batch in run]),
            np.concatenate([batch.ts_us for batch in run]),
            None if run[0].request_ids is None else np.concatenate([batch.request_ids for batch in run]),
            run[0].vm_version,
            run[0].embedding_version,
            run[0].code_dim,
        )
        for run in runs
    ]


def served_dir(root: Path, vm_name: str) -> Path:
    """Where the features served to one VM are logged: each VM's own hour-partitioned dataset under ``root``."""
    return root / vm_name


def read_served(dataset_dir: Path, start: datetime, end: datetime, code_dim: int) -> pa.Table:
    return read_range(dataset_dir, start, end, served_schema(code_dim))


def served_codes(table: pa.Table, tier: str) -> np.ndarray:
    """One tier's codes as an (n, code_dim) float32 matrix."""
    column = table[tier].combine_chunks()
    return column.values.to_numpy().reshape(len(column), column.type.list_size).astype(np.float32)


BUILD_ROWS = 4096  # rows the writer builds into one table: a few ms of its GIL, not ~100 ms at a flush
FLUSH = "flush"  # a request on the batch queue: write what is pending, then answer on the reply queue
STOP = None
CHILD_NICENESS = 10
PARENT_CHECK_S = 1.0  # how often an idle writer process checks that its parent is still there
# Replies: ("failed", error) as soon as a batch could not be built or written, so the service counts it while
# it runs; ("flushed", first error since the last flush or None) answering each FLUSH.
FAILED, FLUSHED = "failed", "flushed"
STOP_SIGNALS = (signal.SIGTERM, signal.SIGINT)


def write_loop(
    batches: BatchQueue,
    replies: BatchQueue,
    dataset_dir: Path,
    flush_rows: int,
    parent_alive: Callable[[], bool] | None = None,
) -> None:
    """The writer, in a thread or a child process: rows are built every :data:`BUILD_ROWS` (all at once at
    flush they would hold the GIL for ~100 ms), and every ``flush_rows`` rows, and on each FLUSH, one new
    part file is written per hour pending. Each failure is reported at once, and a FLUSH is answered with
    None or the first error since the last. With ``parent_alive``, a writer whose parent is gone writes what
    it holds and returns."""
    pending: list[pa.Table] = []
    unbuilt: list[ServedBatch] = []
    rows, unbuilt_rows, error = 0, 0, None  # rows since the last write; of them, rows still in ``unbuilt``

    def failed(exc: Exception) -> None:
        nonlocal error
        error = error or repr(exc)
        replies.put((FAILED, repr(exc)))

    def build() -> None:
        nonlocal unbuilt, unbuilt_rows
        try:
            pending.extend(batches_tables(unbuilt))
        except Exception:  # one bad batch loses its own rows only
            for batch in unbuilt:
                try:
                    pending.extend(batches_tables([batch]))
                except Exception as exc:
                    failed(exc)
        unbuilt, unbuilt_rows = [], 0

    def write() -> None:
        nonlocal pending, rows
        build()
        if pending:
            try:
                part = f"part-{uuid.uuid4().hex}"
                write_hourly(pa.concat_tables(pending), dataset_dir, part, no_dictionary=TIERS)
            except Exception as exc:  # keep serving; reported now, and at the next flush
                failed(exc)
        pending, rows = [], 0

    while True:
        try:
            item = batches.get() if parent_alive is None else batches.get(timeout=PARENT_CHECK_S)
        except queue.Empty:
            if parent_alive is not None and not parent_alive():
                write()
                getattr(replies, "cancel_join_thread", lambda: None)()  # nobody will read the replies
                return
            continue
        if item is STOP:
            write()
            return
        if isinstance(item, ServedBatch):
            unbuilt.append(item)
            rows += item.rows
            unbuilt_rows += item.rows
            if unbuilt_rows >= BUILD_ROWS:
                build()
        if item == FLUSH or rows >= flush_rows:
            write()
        if item == FLUSH:
            replies.put((FLUSHED, error))
            error = None


def _child_main(batches: BatchQueue, replies: BatchQueue, dataset_dir: Path, flush_rows: int) -> None:
    # The service's process group gets SIGTERM (or SIGINT) at a stop, this writer with it: it must outlive
    # that until its parent's shutdown has it flush and stop. It still ends if the parent dies unasked.
    for sig in STOP_SIGNALS:
        signal.signal(sig, signal.SIG_IGN)
    signal.pthread_sigmask(signal.SIG_UNBLOCK, STOP_SIGNALS)  # blocked by the parent from the start
    parent = os.getppid()
    os.nice(CHILD_NICENESS)  # under load, serving goes first; the log takes what is left
    write_loop(batches, replies, dataset_dir, flush_rows, parent_alive=lambda: os.getppid() == parent)


class ServedLogError(RuntimeError):
    """The writer failed to write rows, or died."""


class ServedLog:
    """A background writer of served rows; each flush writes one new part file per hour it holds.

    ``child_process=True`` (the HTTP service) writes from a child process at a lower priority: building rows
    and encoding Parquet cost about a millisecond of CPU per 200-candidate request, and in the serving
    process they contend for its GIL (bench_serving). A thread (the default) suits batch callers such as the
    replay. Either way a full queue drops and counts the batch; serving never waits for the log.
    """

    def __init__(
        self,
        dataset_dir: Path,
        flush_rows: int = 100_000,
        max_pending: int = 1024,
        on_drop: Callable[[int], None] | None = None,
        child_process: bool = False,
        on_failure: Callable[[str], None] | None = None,
    ) -> None:
        self.dataset_dir = Path(dataset_dir)
        self._on_drop = on_drop or (lambda rows: None)
        self._on_failure = on_failure or (lambda error: None)
        self.dropped_rows = 0
        self.write_failures = 0
        self.error: str | None = None
        self._closed = False
        self._flushing = threading.Lock()  # a poll never takes the answer a flush waits for
        if child_process:
            context = multiprocessing.get_context("spawn")  # no fork of a threaded server
            self._batches: BatchQueue = context.Queue(maxsize=max_pending)
            self._replies: BatchQueue = context.Queue()
            host = context.Process(
                target=_child_main, args=(self._batches, self._replies, self.dataset_dir, flush_rows), daemon=True
            )
        else:
            self._batches, self._replies = queue.Queue(maxsize=max_pending), queue.Queue()
            host = threading.Thread(
                target=write_loop, args=(self._batches, self._replies, self.dataset_dir, flush_rows), daemon=True
            )
        host.name = "served-log"
        self._host = host
        if child_process:  # the child starts with them blocked (the mask survives exec) until it ignores them
            old_mask = signal.pthread_sigmask(signal.SIG_BLOCK, STOP_SIGNALS)
            try:
                host.start()
            finally:
                signal.pthread_sigmask(signal.SIG_SETMASK, old_mask)
        else:
            host.start()
        if child_process:  # before multiprocessing's own exit hook, which would SIGTERM (ignored) and join it
            atexit.register(self._close_at_exit)

    @property
    def pid(self) -> int | None:
        """The child process's pid (None for a thread)."""
        return getattr(self._host, "pid", None)

    def log(self, batch: ServedBatch) -> bool:
        """Queue a batch for writing; False (and counted) if the writer is behind or closed."""
        self.poll()
        try:
            if self._closed:
                raise queue.Full
            self._batches.put_nowait(batch)
            return True
        except queue.Full:
            self.dropped_rows += batch.rows
            self._on_drop(batch.rows)
            return False

    def poll(self) -> None:
        """Count the failures the writer has reported so far (never waits)."""
        if not self._flushing.acquire(blocking=False):
            return
        try:
            while not self._closed:
                try:
                    kind, error = self._replies.get_nowait()
                except (queue.Empty, OSError, ValueError):
                    return
                self._reply(kind, error)
        finally:
            self._flushing.release()

    def _reply(self, kind: str, error: str | None) -> str | None:
        if kind == FAILED:
            self.write_failures += 1
            self._on_failure(error)
        return error

    def flush(self, timeout_s: float | None = None) -> None:
        """Write everything queued so far (blocks until it is on disk); raises if rows were lost since the
        last flush, or if the writer has not answered in ``timeout_s``."""
        with self._flushing:
            self._flush(None if timeout_s is None else time.monotonic() + timeout_s)

    def _flush(self, deadline: float | None) -> None:
        while True:  # a full queue and a dead writer would block a plain put forever
            try:
                self._batches.put(FLUSH, timeout=1.0)
                break
            except queue.Full:
                self._check_writer(deadline)
        while True:
            try:
                kind, error = self._replies.get(timeout=1.0)
            except queue.Empty:
                self._check_writer(deadline)
                continue
            if kind == FLUSHED:
                break
            self._reply(kind, error)
        if error is not None:
            self.error = error
            raise ServedLogError(f"served log writer failed: {error}")

    def _check_writer(self, deadline: float | None) -> None:
        if not self._host.is_alive():
            raise ServedLogError(f"the served log writer died (exit code {getattr(self._host, 'exitcode', None)})")
        if deadline is not None and time.monotonic() > deadline:
            raise ServedLogError("the served log writer did not answer in time")

    def close(self, timeout_s: float = 20.0) -> None:
        """Flush, stop the writer (within about ``timeout_s``: a process that does not stop is killed)."""
        if self._closed:
            return
        if self.pid is not None:
            atexit.unregister(self._close_at_exit)
        try:
            if self._host.is_alive():
                self.flush(timeout_s)
        finally:
            self._closed = True
            if self._host.is_alive():
                try:
                    self._batches.put(STOP, timeout=timeout_s)
                except queue.Full:
                    pass
                self._host.join(timeout_s)
            if self.pid is not None:
                if self._host.is_alive():
                    self._host.kill()
                    self._host.join(5.0)
                # release the queues' semaphores now, not at the tracker's exit (a warning); a writer that did
                # not read everything leaves a feeder thread that could block forever, so it is not waited for
                clean = self._host.exitcode == 0
                for q in (self._batches, self._replies):
                    q.close()
                    if clean:
                        q.join_thread()
                    else:
                        q.cancel_join_thread()
                self._batches = self._replies = None

    def _close_at_exit(self) -> None:
        try:
            self.close()
        except ServedLogError:
            pass
