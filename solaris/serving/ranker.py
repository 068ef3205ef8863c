"""The in-process ranker: one batched store read for all tiers, one VM forward pass, tier per candidate.

The store is a dependency that may fail or stall; the ranker's answer must not. With a timeout set, the read
runs on a small pool and a read that errors, overruns the timeout or finds the pool saturated is answered
as tier none (and counted). The next request tries the store again, so serving recovers by itself.
"""

from __future__ import annotations

import threading
import time
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime

import numpy as np
import torch

from solaris.serving.champion import ChampionWatcher, ServingModel
from solaris.serving.metrics import RankerMetrics
from solaris.serving.servedlog import ServedLog, served_table
from solaris.serving.tiers import TIER_NAMES, absent, feeding_tier, served_inputs, tier_counts
from solaris.store.base import FeatureStore, TierBatchRead
from solaris.store.codec import to_micros


class NotReady(RuntimeError):
    """No champion VM is loaded yet."""


@dataclass(frozen=True)
class Served:
    """The answer for a batch of (user, item) pairs, row i answering pair i."""

    scores: np.ndarray  # float32 click probabilities
    tiers: np.ndarray  # int8 codes into TIER_NAMES
    inputs: np.ndarray  # the VM's input matrix, as served
    vm_version: str
    embedding_version: str
    store_failure: str | None  # None, or why the store tiers were skipped
    read_seconds: float
    score_seconds: float

    def tier_names(self) -> list[str]:
        return [TIER_NAMES[t] for t in self.tiers]


class Ranker:
    def __init__(
        self,
        store: FeatureStore,
        models: ChampionWatcher | ServingModel,
        served_log: ServedLog | None = None,
        store_timeout_s: float | None = None,
        metrics: RankerMetrics | None = None,
        read_workers: int = 4,
    ) -> None:
        self.store = store
        self._models = models
        self.served_log = served_log
        self.metrics = metrics or RankerMetrics()
        self.store_timeout_s = store_timeout_s
        self._pool = ThreadPoolExecutor(read_workers, thread_name_prefix="store-read") if store_timeout_s else None
        self._read_slots = threading.BoundedSemaphore(2 * read_workers)

    @property
    def model(self) -> ServingModel:
        model = self._models.current if isinstance(self._models, ChampionWatcher) else self._models
        if model is None:
            raise NotReady("no champion VM loaded yet")
        return model

    def rank(
        self,
        user_id: int,
        item_ids: np.ndarray,
        t: datetime,
        positions: np.ndarray | None = None,
        request_id: int | None = None,
    ) -> Served:
        """Score one request's candidates as of ``t`` (all at ``positions``, default the top slot)."""
        items = np.asarray(item_ids, np.int64)
        n = len(items)
        users = np.full(n, user_id, np.int64)
        ts = np.full(n, to_micros(t, "t"), np.int64)
        pos = np.zeros(n, np.int64) if positions is None else np.asarray(positions, np.int64)
        requests = None if request_id is None else np.full(n, request_id, np.int64)
        return self.serve(users, items, ts, pos, t, requests)

    def serve(
        self,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        ts_us: np.ndarray,
        positions: np.ndarray,
        t: datetime,
        request_ids: np.ndarray | None = None,
    ) -> Served:
        """Score any batch of pairs with one read per tier, fresh at ``t`` (the replay serves an hour of
        requests at once, with ``t`` their latest time, so no row expired at any of them is read)."""
        started = time.perf_counter()
        model = self.model  # one reference for the whole batch: VM and embedding version stay together
        version = model.pinned.embedding_version
        read, failure = self._read(version, user_ids, item_ids, t, model.code_dim)
        read_done = time.perf_counter()
        inputs = served_inputs(model.vm, version, user_ids, item_ids, ts_us, positions, read)
        with torch.inference_mode():
            scores = model.vm(torch.from_numpy(inputs)).numpy()
        done = time.perf_counter()
        tiers = feeding_tier(read)
        served = Served(scores, tiers, inputs, model.pinned.vm, version, failure, read_done - started, done - read_done)
        self._record(served, done - started)
        if self.served_log is not None:
            table = served_table(inputs, scores, tiers, ts_us, request_ids, model.pinned.vm, version, model.code_dim)
            self.served_log.log(table)
        return served

    def _read(
        self, version: str, users: np.ndarray, items: np.ndarray, t: datetime, dim: int
    ) -> tuple[TierBatchRead, str | None]:
        if self._pool is None:
            return self.store.read_tiers_batch(version, users, items, t), None
        if not self._read_slots.acquire(blocking=False):
            return absent(len(users), dim), "overloaded"  # reads are already piling up on a stalled store
        try:
            future = self._pool.submit(self.store.read_tiers_batch, version, users, items, t)
        except BaseException:
            self._read_slots.release()
            raise
        future.add_done_callback(lambda _: self._read_slots.release())
        try:
            return future.result(timeout=self.store_timeout_s), None
        except FutureTimeout:
            return absent(len(users), dim), "timeout"
        except Exception:
            return absent(len(users), dim), "error"

    def _record(self, served: Served, seconds: float) -> None:
        m = self.metrics
        m.latency.labels("total").observe(seconds)
        m.latency.labels("store").observe(served.read_seconds)
        m.latency.labels("model").observe(served.score_seconds)
        for name, count in tier_counts(served.tiers).items():
            if count:
                m.candidates.labels(name).inc(count)
        if served.store_failure is not None:
            m.store_failures.labels(served.store_failure).inc()

    def close(self) -> None:
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
        if self.served_log is not None:
            self.served_log.close()
