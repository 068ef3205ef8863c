"""The user KNN neighbour table: for each user, the ``k`` most similar users among those who can lend a code.

It backs the neighbour serving tier, which for (user, item) serves the similarity-weighted mean of the
neighbours' fresh pair codes for the same item (``read_tiers.sql``). So the index holds only the users with
fresh pair codes (the ``pool``), and every user who may be served is a query, including users with no pair
code and no aggregate of their own, for whom this is the only tier. Every one of them needs a vector: the
precompute uses the FM's user vector (:mod:`solaris.precompute.knn_users` says why).

Similarity is cosine (vectors L2-normalised, inner product). Below ``exact_threshold`` pooled users an exact
flat index is cheapest; from there an HNSW graph is (a flat query costs time linear in the pool). Measured by
bench/bench_knn.py (2 cores, 32-d, k=10, n users pooled and queried): at 50k flat took 10 s, HNSW (M 32,
efSearch 128) 5 s on clustered and 12 s on near-random vectors; at 200k flat about 175 s, HNSW 46 s and
103 s, recall@10 0.993-0.999. IVF (4 sqrt(n) cells, nprobe 32) was faster still, 25 s at 200k, but found only
0.57-0.72 of the true neighbours of near-random vectors, and nothing promises the user vectors cluster.
The graph is inserted on one thread (no slower on 2 cores, measured): a multi-threaded HNSW insert may depend
on thread timing, and a rerun of an hour must write the same rows; the search, read-only, uses every thread.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass

import faiss
import numpy as np

PAD_ID = -1
#: Pool size from which HNSW beats the exact flat index (bench/bench_knn.py: about equal at 50k).
EXACT_THRESHOLD = 50_000
# Queries from which faiss's exact search computes the products with BLAS (its own default is 20): never, in
# a search. The matrix product's last bits vary with a query's row in the block on some CPUs (AMD EPYC: 1-2
# float32 ulps), so users split among shards found other similarities than one search found; faiss's own
# per-pair products do not, at 2.2x the time of the exact search (20k queries x 20k pool: 0.73 vs 0.33 s).
NO_BLAS = 2**31 - 1


@dataclass(frozen=True)
class NeighbourTable:
    """Rows sorted by user id; slots without a neighbour hold id ``-1`` and similarity 0."""

    user_ids: np.ndarray  # [n] int64
    neighbour_ids: np.ndarray  # [n, k] int64
    similarities: np.ndarray  # [n, k] float32, cosine, descending within a row

    @property
    def k(self) -> int:
        return int(self.neighbour_ids.shape[1])

    def rows(self, user_ids: np.ndarray) -> NeighbourTable:
        """The rows of ``user_ids`` (all present), e.g. to upsert only what a run recomputed."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        pos = np.searchsorted(self.user_ids, user_ids)
        found = np.zeros(len(user_ids), bool)
        inside = pos < len(self.user_ids)
        found[inside] = self.user_ids[pos[inside]] == user_ids[inside]
        if not found.all():
            raise KeyError(f"user {user_ids[~found][0]} is not in the neighbour table")
        return NeighbourTable(self.user_ids[pos], self.neighbour_ids[pos], self.similarities[pos])


def degenerate(vectors: np.ndarray) -> np.ndarray:
    """Which rows have no direction, so no cosine: a zero or non-finite vector (as float32, as searched).

    The FM's vector of an id it never trained on can be exactly zero; such a row gets no neighbours and lends
    none, rather than stopping the hour (the precompute steps count them)."""
    with np.errstate(over="ignore"):  # a norm beyond float32 is one of the cases reported
        norms = np.linalg.norm(np.asarray(vectors, np.float32), axis=1)
    return ~np.isfinite(norms) | (norms == 0)


def _validated(user_ids: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Ids and float32 vectors ordered by user id, the vectors unit-norm, and which of them are
    :func:`degenerate` (their rows zero)."""
    user_ids = np.asarray(user_ids, dtype=np.int64)
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(vectors) != len(user_ids):
        raise ValueError(f"vectors must be [users={len(user_ids)}, dim], got shape {vectors.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    order = np.argsort(user_ids, kind="stable")
    user_ids, vectors = user_ids[order], vectors[order].astype(np.float32)
    dup = np.flatnonzero(np.diff(user_ids) == 0)
    if len(dup):
        raise ValueError(f"user {user_ids[dup[0]]} appears more than once")
    bad = degenerate(vectors)
    unit = np.zeros_like(vectors)
    unit[~bad] = vectors[~bad] / np.linalg.norm(vectors[~bad], axis=1, keepdims=True)
    return user_ids, unit, bad


def pool_index(
    vectors: np.ndarray,
    *,
    exact_threshold: int = EXACT_THRESHOLD,
    hnsw_m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 128,
) -> faiss.Index:
    """The pool's index: flat below ``exact_threshold`` vectors, else an HNSW graph, inserted on one thread
    so that the same vectors always give the same graph (and a rerun the same rows)."""
    dim = vectors.shape[1]
    if len(vectors) < exact_threshold:
        index = faiss.IndexFlatIP(dim)
        index.add(vectors)
        return index
    index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
    index.hnsw.efConstruction = ef_construction
    index.hnsw.efSearch = ef_search
    with omp_threads(1):
        index.add(vectors)
    return index


def _search(
    index: faiss.Index, pool_ids: np.ndarray, query_ids: np.ndarray, queries: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k pooled neighbours other than the user itself.

    One extra result is asked for so that dropping the user's own hit still leaves k. Self is found by id,
    not by similarity, because a different user with an identical vector also scores 1.0.
    """
    sims, labels = index.search(queries, k + 1)
    is_self = pool_ids[labels.clip(min=0)] == query_ids[:, None]
    missing = labels < 0
    # Stable sort moves self and missing slots to the end while keeping the similarity order of the rest.
    keep = np.argsort(is_self | missing, axis=1, kind="stable")[:, :k]
    labels = np.take_along_axis(labels, keep, axis=1)
    sims = np.take_along_axis(sims, keep, axis=1)
    dropped = np.take_along_axis(is_self | missing, keep, axis=1)
    ids = np.where(dropped, PAD_ID, pool_ids[labels.clip(min=0)])
    return ids.astype(np.int64), np.where(dropped, 0.0, sims).astype(np.float32)


def _pool_positions(ids: np.ndarray, pool: np.ndarray | None) -> np.ndarray:
    """Positions in ``ids`` of the pooled users (all of them without a pool); a pooled id needs a vector."""
    if pool is None:
        return np.arange(len(ids))
    pool = np.unique(np.asarray(pool, dtype=np.int64))
    pos = np.searchsorted(ids, pool).clip(max=max(len(ids) - 1, 0))
    known = ids[pos] == pool if len(ids) else np.zeros(len(pool), bool)
    if not known.all():
        raise ValueError(f"pooled user {pool[~known][0]} has no vector among the users")
    return pos


@dataclass(frozen=True)
class PoolIndex:
    """The index over the pooled users' unit vectors and their ids in its order: built once an hour and
    searched by every user shard's task, each for its own users."""

    index: faiss.Index
    pool_ids: np.ndarray  # [m] int64, the index's rows

    def to_bytes(self) -> bytes:
        return faiss.serialize_index(self.index).tobytes()

    @classmethod
    def from_bytes(cls, data: bytes, pool_ids: np.ndarray) -> PoolIndex:
        return cls(faiss.deserialize_index(np.frombuffer(data, np.uint8)), np.asarray(pool_ids, np.int64))


def index_pool(
    user_ids: np.ndarray,
    vectors: np.ndarray,
    pool: np.ndarray | None = None,
    *,
    exact_threshold: int = EXACT_THRESHOLD,
    hnsw_m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 128,
) -> PoolIndex:
    """The :func:`pool_index` of ``pool`` (default: all the users), each pooled user needing a vector; a
    :func:`degenerate` vector is left out of it."""
    ids, unit, bad = _validated(user_ids, vectors, 1)
    pooled = _pool_positions(ids, pool)
    pooled = pooled[~bad[pooled]]
    index = pool_index(
        unit[pooled],
        exact_threshold=exact_threshold,
        hnsw_m=hnsw_m,
        ef_construction=ef_construction,
        ef_search=ef_search,
    )
    return PoolIndex(index, ids[pooled])


def search_pool(pool: PoolIndex, user_ids: np.ndarray, vectors: np.ndarray, k: int, threads: int = 2) -> NeighbourTable:
    """Each user's ``k`` most similar pooled users, never itself; a :func:`degenerate` vector is not searched
    and keeps a padded row, so a rewrite empties its old list. ``threads`` sets faiss's OpenMP pool for the
    search, restored after it.

    An exact search computes each similarity alone (:data:`NO_BLAS`), so a user gets the same row whichever
    users share its search, and the users split among shards find what one search finds.
    """
    ids, unit, bad = _validated(user_ids, vectors, k)
    queries = np.flatnonzero(~bad)
    neighbour_ids = np.full((len(ids), k), PAD_ID, np.int64)
    similarities = np.zeros((len(ids), k), np.float32)
    if len(pool.pool_ids) and len(queries):
        with omp_threads(threads), blas_threshold(NO_BLAS):
            found, sims = _search(pool.index, pool.pool_ids, ids[queries], unit[queries], k)
        neighbour_ids[queries], similarities[queries] = found, sims
    return NeighbourTable(ids, neighbour_ids, similarities)


def build_neighbours(
    user_ids: np.ndarray,
    vectors: np.ndarray,
    k: int,
    *,
    pool: np.ndarray | None = None,
    exact_threshold: int = EXACT_THRESHOLD,
    hnsw_m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 128,
    threads: int = 2,
) -> NeighbourTable:
    """Every user's ``k`` most similar users among ``pool`` (default: among all of them), never itself: the
    pool indexed (:func:`index_pool`) and every user searched in it (:func:`search_pool`).

    Every user is searched, pooled or not: a user outside the pool (no pair code to lend) still needs
    neighbours who have one. Rows with fewer than ``k`` pooled candidates are padded.
    """
    index = index_pool(
        user_ids,
        vectors,
        pool,
        exact_threshold=exact_threshold,
        hnsw_m=hnsw_m,
        ef_construction=ef_construction,
        ef_search=ef_search,
    )
    return search_pool(index, user_ids, vectors, k, threads)


@contextmanager
def blas_threshold(queries: int) -> Iterator[None]:
    """faiss's process-wide query count from which exact searches use BLAS, for the block, then the one before."""
    before = faiss.cvar.distance_compute_blas_threshold
    faiss.cvar.distance_compute_blas_threshold = queries
    try:
        yield
    finally:
        faiss.cvar.distance_compute_blas_threshold = before


@contextmanager
def omp_threads(n: int) -> Iterator[None]:
    """faiss's OpenMP thread count for the block, then the count before it.

    The OpenMP pool is process-wide, and torch shares it when torch was loaded first (one libgomp): left set,
    it changed torch's thread count for every later forward in the process, and with it the last bits of its
    sums (a rerun of an hour in the same process scored a pair one float32 ulp apart from its first run)."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(n)
    try:
        yield
    finally:
        faiss.omp_set_num_threads(before)
