"""bench_serving in process: ``Ranker.rank`` against the floor, the same four tiers gathered from numpy arrays
and the same input build and VM pass, taking turns on the same requests; each call split into read and model
time."""

from __future__ import annotations

import sqlite3
import time
from collections.abc import Callable
from contextlib import closing
from dataclasses import dataclass

import numpy as np
import psycopg
from bench_store import DIM, ITEM_POOL, Pairs
from serving_world import AT

from solaris.enrichment.tiers import served_inputs
from solaris.models.features import pair_key
from solaris.serving import Ranker
from solaris.serving.app import ServiceConfig
from solaris.serving.champion import ServingModel
from solaris.store import FeatureStore, TierBatchRead
from solaris.store.codec import decode_exposure, decode_lists, storage_dtype, to_micros
from solaris.store.combine import weighted_mean

STORE_TIMEOUT_S = ServiceConfig().store_timeout_ms / 1000
TARGET_MS = {"sqlite": 5.0, "postgresql": 8.0}  # in-process read + score p99 (issue #6)
FLOOR = "floor (numpy)"


def fetch(backend: str, raw: str, sql: str) -> list[tuple]:
    if backend == "postgresql":
        with psycopg.connect(raw, options="-csearch_path=bench") as conn:
            return conn.execute(sql).fetchall()
    with closing(sqlite3.connect(raw)) as conn:
        return conn.execute(sql).fetchall()


@dataclass(frozen=True)
class MemoryTiers:
    """The floor: every tier in numpy arrays, pairs found by ``searchsorted`` over sorted pair keys."""

    keys: np.ndarray  # sorted pair_key(user, item)
    vectors: np.ndarray  # row i: the vector of keys[i], as the store returns it (float16 -> float32)
    agg: np.ndarray  # (n_users, dim)
    agg_mask: np.ndarray
    neighbour_ptr: np.ndarray  # user u's neighbours are neighbours[ptr[u]:ptr[u + 1]]
    neighbours: np.ndarray
    similarity: np.ndarray
    item_ptr: np.ndarray  # item i's neighbours are item_neighbours[item_ptr[i]:item_ptr[i + 1]]
    item_neighbours: np.ndarray
    item_similarity: np.ndarray
    user_counts: np.ndarray  # (n_users, windows) exposure counters
    count_keys: np.ndarray  # sorted pair_key(user, item) of the pairs with counters
    pair_counts: np.ndarray  # row i: the counters of count_keys[i]

    @classmethod
    def load(cls, data: Pairs, backend: str, raw: str) -> MemoryTiers:
        """Pairs from the rows written; aggregates and neighbours (drawn inside ``fill``) read back."""
        keys = pair_key(data.users, data.items)
        order = np.argsort(keys)
        n_users = int(data.users.max()) + 1
        agg, agg_mask = np.zeros((n_users, DIM), np.float32), np.zeros(n_users, bool)
        rows = fetch(backend, raw, "SELECT user_id, vector FROM user_aggregates")
        users = np.array([r[0] for r in rows], np.int64)
        blobs = b"".join(bytes(r[1]) for r in rows)  # the store's float16 bytes, decoded as it decodes them
        agg[users], agg_mask[users] = np.frombuffer(blobs, storage_dtype("float16")).reshape(-1, DIM), True
        nb = np.array(fetch(backend, raw, "SELECT user_id, neighbour_id, similarity FROM user_neighbours"), np.float64)
        nb = nb[np.lexsort((nb[:, 1], nb[:, 0]))]
        ptr = np.searchsorted(nb[:, 0], np.arange(n_users + 1))
        lists = sorted(
            (r[0], bytes(r[1])) for r in fetch(backend, raw, "SELECT item_id, neighbours FROM item_neighbours")
        )
        slots = np.array([len(blob) // 8 for _, blob in lists], np.int64)  # packed int32 ids then float32 similarities
        listed, listed_sims = decode_lists(b"".join(blob for _, blob in lists), slots)
        keep = listed >= 0
        inb = np.column_stack([np.repeat([item for item, _ in lists], slots), listed, listed_sims])[keep]
        item_ptr = np.searchsorted(inb[:, 0], np.arange(ITEM_POOL + 1))
        vectors = data.vectors[order].astype(np.float16).astype(np.float32)
        rows = fetch(backend, raw, "SELECT user_id, item_count, counts FROM exposure_counts ORDER BY user_id")
        owners, slots = np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64)
        counts, items, pair_counts = decode_exposure(b"".join(bytes(r[2]) for r in rows), slots)
        user_counts = np.zeros((n_users, counts.shape[1]), np.float32)
        user_counts[owners] = counts
        count_keys = pair_key(np.repeat(owners, slots), items)
        by_key = np.argsort(count_keys)
        return cls(
            keys[order],
            vectors,
            agg,
            agg_mask,
            ptr,
            nb[:, 1].astype(np.int64),
            nb[:, 2],
            item_ptr,
            inb[:, 1].astype(np.int64),
            inb[:, 2],
            user_counts,
            count_keys[by_key],
            pair_counts[by_key],
        )

    def _pairs(self, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = pair_key(users, items)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[at] == keys
        return np.where(found[:, None], self.vectors[at], 0), found

    def gather(self, user: int, items: np.ndarray) -> TierBatchRead:
        n = len(items)
        pair, pair_mask = self._pairs(np.full(n, user), items)
        span = slice(self.neighbour_ptr[user], self.neighbour_ptr[user + 1])
        neighbours, similarity = self.neighbours[span], self.similarity[span]
        vectors, found = self._pairs(np.repeat(neighbours, n), np.tile(items, len(neighbours)))
        at = np.tile(np.arange(n), len(neighbours))[found]
        knn, knn_mask = weighted_mean(at, np.repeat(similarity, n)[found], vectors[found], n)
        agg, agg_mask = np.repeat(self.agg[user][None], n, axis=0), np.full(n, self.agg_mask[user])
        starts, counts = self.item_ptr[items], self.item_ptr[items + 1] - self.item_ptr[items]
        row = np.repeat(np.arange(n), counts)  # each candidate's neighbour-list entries, flattened
        entry = np.arange(counts.sum()) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
        vectors, found = self._pairs(np.full(len(entry), user), self.item_neighbours[entry])
        a2a, a2a_mask = weighted_mean(row[found], self.item_similarity[entry][found], vectors[found], n)
        keys = pair_key(np.full(n, user), items)
        at = np.minimum(np.searchsorted(self.count_keys, keys), len(self.count_keys) - 1)
        pair_counts = np.where((self.count_keys[at] == keys)[:, None], self.pair_counts[at], 0)
        exposure = np.concatenate([np.repeat(self.user_counts[user][None], n, axis=0), pair_counts], axis=1)
        no_cohort = np.zeros(n, bool)  # every bench user has counters: the cohort tier never feeds
        return TierBatchRead(pair, pair_mask, agg, agg_mask, knn, knn_mask, a2a, a2a_mask, exposure, no_cohort)


Timed = Callable[[int, np.ndarray], tuple[float, float, float, bool]]  # total, read, model seconds; failed


def timed_rank(ranker: Ranker) -> Timed:
    def call(user: int, items: np.ndarray) -> tuple[float, float, float, bool]:
        started = time.perf_counter()
        served = ranker.rank(user, items, AT)
        total = time.perf_counter() - started
        return total, served.read_seconds, served.score_seconds, served.store_failure is not None

    return call


def floor_inputs(floor: MemoryTiers, model: ServingModel, user: int, items: np.ndarray) -> tuple[np.ndarray, float]:
    """The VM inputs as the floor builds them, and its gather seconds."""
    started = time.perf_counter()
    read = floor.gather(user, items)
    gathered = time.perf_counter() - started
    n = len(items)
    users, ts, positions = np.full(n, user, np.int64), np.full(n, to_micros(AT, "t"), np.int64), np.zeros(n, np.int64)
    return served_inputs(model.vm, model.pinned.embedding_version, users, items, ts, positions, read), gathered


def timed_floor(floor: MemoryTiers, model: ServingModel) -> Timed:
    def call(user: int, items: np.ndarray) -> tuple[float, float, float, bool]:
        started = time.perf_counter()
        inputs, gathered = floor_inputs(floor, model, user, items)
        model.scorer(inputs)  # the ranker's own forward
        total = time.perf_counter() - started
        return total, gathered, total - gathered, False

    return call


def check_floor(ranker: Ranker, floor: MemoryTiers, model: ServingModel, reqs: list[tuple[int, np.ndarray]]) -> None:
    """The floor must do the ranker's work: the same VM inputs, request by request."""
    for user, items in reqs:
        served = ranker.rank(user, items, AT)
        if served.store_failure is not None:
            raise RuntimeError(f"store read failed ({served.store_failure}) while checking the floor")
        inputs, _ = floor_inputs(floor, model, user, items)
        np.testing.assert_allclose(inputs, served.inputs, rtol=1e-5, atol=1e-6, err_msg=f"floor != ranker, user {user}")


@dataclass(frozen=True)
class Split:
    total: np.ndarray  # ms
    read: np.ndarray
    model: np.ndarray
    failures: int


def take_turns(calls: dict[str, Timed], reqs: list[tuple[int, np.ndarray]]) -> dict[str, Split]:
    """Each call's latencies on the same requests, the calls rotating who goes first (bench_store's
    ``paired_latencies_ms`` times whole calls only; this keeps each call's read/model split)."""
    names = list(calls)
    for user, items in reqs[:50]:  # warm caches, prepared statements, the read pool's threads
        for name in names:
            calls[name](user, items)
    times: dict[str, list[tuple[float, float, float, bool]]] = {name: [] for name in names}
    for k, (user, items) in enumerate(reqs):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            times[name].append(calls[name](user, items))
    out = {}
    for name, rows in times.items():
        total, read, model, failed = (np.array(column) for column in zip(*rows, strict=True))
        out[name] = Split(total * 1e3, read * 1e3, model * 1e3, int(failed.sum()))
    return out


def in_process(
    store: FeatureStore, reqs: list[tuple[int, np.ndarray]], floor: MemoryTiers, model: ServingModel
) -> dict[str, Split]:
    direct, pooled = Ranker(store, model), Ranker(store, model, store_timeout_s=STORE_TIMEOUT_S)
    try:
        check_floor(direct, floor, model, reqs[:20])
        calls = {
            "ranker": timed_rank(direct),
            f"ranker, {STORE_TIMEOUT_S * 1e3:.0f} ms timeout": timed_rank(pooled),
            FLOOR: timed_floor(floor, model),
        }
        return take_turns(calls, reqs)
    finally:
        direct.close()
        pooled.close()
