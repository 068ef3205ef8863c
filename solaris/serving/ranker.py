"""The in-process ranker: one batched store read for all tiers, one VM forward pass, tier per candidate.

The store is a dependency that may fail, stall or not hold the served version yet; the ranker's answer must not.
A store without the served VM's embedding version (a new stack before its first precompute, a store re-created)
is the paper's fallback for every candidate: tier none, no read, ``store`` saying ``version_missing`` until
:meth:`Ranker.check_store` finds the version. With a timeout set, the read
runs on a small pool and a read that errors, overruns the timeout or finds the pool saturated is answered
as tier none (and counted). The next request tries the store again, so serving recovers by itself.

``serve`` waits for the read on the calling thread; ``serve_async`` awaits it, so the HTTP service scores
on its event loop. A store with ``local_reads`` (SQLite) is read on the caller's own thread, its time bounded
by interrupting the read: a handoff to another thread costs more than the read at the tail, as the two
threads take turns at the GIL (bench_serving). A network store is read on the pool.
"""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import Future, ThreadPoolExecutor
from concurrent.futures import TimeoutError as FutureTimeout
from dataclasses import dataclass
from datetime import datetime

import numpy as np

from solaris.enrichment.tiers import TIER_NAMES, absent, feeding_tier, served_inputs, tier_counts
from solaris.serving.champion import ChampionWatcher, ServingModel
from solaris.serving.metrics import TOTAL_STAGE, VERSION_MISSING, RankerMetrics
from solaris.serving.servedlog import ServedBatch, ServedLog
from solaris.store.base import FeatureStore
from solaris.store.codec import to_micros
from solaris.store.errors import StoreError, StoreReadTimeout
from solaris.store.records import TierBatchRead


class NotReady(RuntimeError):
    """No champion VM is loaded yet."""


@dataclass(frozen=True)
class Served:
    """The answer for a batch of (user, item) pairs, row i answering pair i."""

    scores: np.ndarray  # float32 probabilities of the VM's label (solaris.vms)
    tiers: np.ndarray  # int8 codes into TIER_NAMES
    inputs: np.ndarray  # the VM's input matrix, as served
    vm_name: str
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
        self._pool = ThreadPoolExecutor(read_workers, thread_name_prefix="store-read")  # threads start on first use
        self._read_slots = threading.BoundedSemaphore(2 * read_workers)
        self._missing_version: str | None = None  # the store lacked it at the last check_store

    def check_store(self) -> None:
        """Ask the store whether it holds the served embedding version. The service calls it at each poll, so
        a ranker degraded to tier none upgrades by itself once a precompute writes the version. A store that
        cannot answer leaves the state as it was: its reads then fail, and are counted, on their own."""
        try:
            version = self.model.pinned.embedding_version
        except NotReady:
            return
        try:
            self.store.get_embedding_version(version)
        except StoreError:
            self._missing_version = version
            return
        except Exception:
            return
        self._missing_version = None

    @property
    def degraded(self) -> str | None:
        """Why every candidate is served tier none without a read, or None."""
        current = self._current()
        if current is None or not self._reads_nothing(current):
            return None
        return (
            f"embedding version {self._missing_version} is not in the feature store yet: every candidate is served"
            " tier none until a precompute writes it"
        )

    def _reads_nothing(self, model: ServingModel) -> bool:
        return model.pinned.embedding_version == self._missing_version

    def _current(self) -> ServingModel | None:
        return self._models.current if isinstance(self._models, ChampionWatcher) else self._models

    @property
    def model(self) -> ServingModel:
        model = self._current()
        if model is None:
            raise NotReady("no champion VM loaded yet")
        return model

    def use(self, model: ServingModel) -> None:
        """Serve ``model`` from now on: a replay switches embedding versions at the hour it chooses. A ranker
        built on a :class:`ChampionWatcher` follows the registry instead."""
        if isinstance(self._models, ChampionWatcher):
            raise TypeError("this ranker follows its ChampionWatcher's champion; it cannot be pinned to a model")
        self._models = model

    def rank(
        self,
        user_id: int,
        item_ids: np.ndarray,
        t: datetime,
        positions: np.ndarray | None = None,
        request_id: int | None = None,
    ) -> Served:
        """Score one request's candidates as of ``t`` (all at ``positions``, default the top slot)."""
        return self.serve(*_one_request(user_id, item_ids, t, positions, request_id))

    async def rank_async(
        self,
        user_id: int,
        item_ids: np.ndarray,
        t: datetime,
        positions: np.ndarray | None = None,
        request_id: int | None = None,
    ) -> Served:
        """``rank`` for an event loop: the store read is awaited, never blocking the loop."""
        return await self.serve_async(*_one_request(user_id, item_ids, t, positions, request_id))

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
        if self._reads_nothing(model):
            read, failure = None, VERSION_MISSING
        elif self.store_timeout_s is None:
            version, cohorts = model.pinned.embedding_version, model.cohorts(user_ids)
            read, failure = self.store.read_tiers_batch(version, user_ids, item_ids, t, cohorts=cohorts), None
        elif self.store.local_reads:
            read, failure = self._read_here(model, user_ids, item_ids, t)
        else:
            future = self._submit_read(model, user_ids, item_ids, t)
            read, failure = _wait(future, self.store_timeout_s) if future else (None, "overloaded")
        return self._score(model, started, read, failure, user_ids, item_ids, ts_us, positions, request_ids)

    async def serve_async(
        self,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        ts_us: np.ndarray,
        positions: np.ndarray,
        t: datetime,
        request_ids: np.ndarray | None = None,
    ) -> Served:
        """``serve`` for an event loop: a network store is read on the pool (with or without a timeout) and
        awaited; a local store's read has nothing to await and runs as in ``serve``."""
        model = self.model
        if self.store.local_reads or self._reads_nothing(model):
            return self.serve(user_ids, item_ids, ts_us, positions, t, request_ids)
        started = time.perf_counter()
        future = self._submit_read(model, user_ids, item_ids, t)
        read, failure = (await _wait_async(future, self.store_timeout_s)) if future else (None, "overloaded")
        return self._score(model, started, read, failure, user_ids, item_ids, ts_us, positions, request_ids)

    def _read_here(
        self, model: ServingModel, users: np.ndarray, items: np.ndarray, t: datetime
    ) -> tuple[TierBatchRead | None, str | None]:
        """A local store's read on this thread, interrupted past the timeout."""
        try:
            version, cohorts = model.pinned.embedding_version, model.cohorts(users)
            return self.store.read_tiers_batch(version, users, items, t, self.store_timeout_s, cohorts), None
        except StoreReadTimeout:
            return None, "timeout"
        except Exception:
            return None, "error"

    def _submit_read(self, model: ServingModel, users: np.ndarray, items: np.ndarray, t: datetime) -> Future | None:
        """The read on the pool, or None when reads are already piling up on a stalled store."""
        if not self._read_slots.acquire(blocking=False):
            return None
        try:
            cohorts = model.cohorts(users)
            future = self._pool.submit(
                self.store.read_tiers_batch, model.pinned.embedding_version, users, items, t, cohorts=cohorts
            )
        except BaseException:
            self._read_slots.release()
            raise
        future.add_done_callback(lambda _: self._read_slots.release())
        return future

    def _score(
        self,
        model: ServingModel,
        started: float,
        read: TierBatchRead | None,
        failure: str | None,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        ts_us: np.ndarray,
        positions: np.ndarray,
        request_ids: np.ndarray | None,
    ) -> Served:
        """The VM on what was read (tier none for every candidate when the read failed); recorded and logged."""
        read = absent(len(user_ids), model.code_dim) if read is None else read
        read_done = time.perf_counter()
        version = model.pinned.embedding_version
        inputs = served_inputs(model.vm, version, user_ids, item_ids, ts_us, positions, read)
        scores = model.scorer(inputs)
        done = time.perf_counter()
        tiers = feeding_tier(read)
        pinned = model.pinned
        served = Served(
            scores, tiers, inputs, pinned.vm_name, pinned.vm, version, failure, read_done - started, done - read_done
        )
        self._record(served, done - started)
        if self.served_log is not None:
            self.served_log.log(
                ServedBatch(inputs, scores, tiers, ts_us, request_ids, model.pinned.vm, version, model.code_dim)
            )
        return served

    def _record(self, served: Served, seconds: float) -> None:
        m, vm = self.metrics, served.vm_name
        m.latency.labels(vm, TOTAL_STAGE).observe(seconds)
        m.latency.labels(vm, "store").observe(served.read_seconds)
        m.latency.labels(vm, "model").observe(served.score_seconds)
        for name, count in tier_counts(served.tiers).items():
            if count:
                m.candidates.labels(vm, name).inc(count)
        if served.store_failure is not None:
            m.store_failures.labels(vm, served.store_failure).inc()

    def close(self) -> None:
        self._pool.shutdown(wait=False, cancel_futures=True)
        if self.served_log is not None:
            self.served_log.close()


def _one_request(
    user_id: int, item_ids: np.ndarray, t: datetime, positions: np.ndarray | None, request_id: int | None
) -> tuple[np.ndarray, np.ndarray, np.ndarray, np.ndarray, datetime, np.ndarray | None]:
    """``serve``'s arguments for one user's candidates, all at time ``t``."""
    items = np.asarray(item_ids, np.int64)
    n = len(items)
    pos = np.zeros(n, np.int64) if positions is None else np.asarray(positions, np.int64)
    requests = None if request_id is None else np.full(n, request_id, np.int64)
    return np.full(n, user_id, np.int64), items, np.full(n, to_micros(t, "t"), np.int64), pos, t, requests


def _wait(future: Future, timeout_s: float | None) -> tuple[TierBatchRead | None, str | None]:
    try:
        return future.result(timeout=timeout_s), None
    except FutureTimeout:
        return None, "timeout"
    except Exception:
        return None, "error"


async def _wait_async(future: Future, timeout_s: float | None) -> tuple[TierBatchRead | None, str | None]:
    try:
        return await asyncio.wait_for(asyncio.wrap_future(future), timeout_s), None
    except TimeoutError:
        return None, "timeout"
    except Exception:
        return None, "error"
