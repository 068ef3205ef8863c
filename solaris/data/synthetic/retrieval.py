"""The serving funnel in front of the ranker: a daily retrieval pool per user, candidates per request drawn
from it, and the logging policy that picks what is shown.

Drawing every request of a day from the same per-user pool is what makes a user's candidates overlap across
hours, which is the property speculative precompute lives on.
"""

from __future__ import annotations

import faiss
import numpy as np

from solaris.data.synthetic.population import unit_rows

# faiss returns this many extra neighbours; re-scoring them exactly in numpy makes the pool independent of
# faiss's float summation order (which varies with its thread count), so worlds stay byte-identical.
_SEARCH_MARGIN = 16
# Queries re-scored per step, bounding the (queries, pool, dim) gather to tens of MB.
_QUERY_CHUNK = 8192


def daily_pools(
    user_latent: np.ndarray,
    item_latent: np.ndarray,
    log_popularity: np.ndarray,
    pool_size: int,
    noise: float,
    popularity_weight: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """Top ``pool_size`` items per user by a noisy query's dot product plus a popularity prior.

    An exact faiss inner-product search (the prior folded in as one more dimension) finds the neighbourhood;
    numpy re-scores it. Returns (n_users, pool_size) int32 item ids in retrieval order (best first).
    """
    n, d = user_latent.shape
    query = unit_rows(user_latent + (noise / np.sqrt(d)) * rng.standard_normal((n, d)).astype(np.float32))
    prior = (popularity_weight * log_popularity).astype(np.float32)
    index = faiss.IndexFlatIP(d + 1)
    index.add(np.hstack([item_latent, prior[:, None]]))
    k = min(pool_size + _SEARCH_MARGIN, len(item_latent))
    pools = np.empty((n, pool_size), dtype=np.int32)
    for lo in range(0, n, _QUERY_CHUNK):
        q = query[lo : lo + _QUERY_CHUNK]
        _, near = index.search(np.hstack([q, np.ones((len(q), 1), np.float32)]), k)
        scores = np.einsum("nd,nkd->nk", q, item_latent[near]) + prior[near]
        pools[lo : lo + _QUERY_CHUNK] = np.take_along_axis(near, top_k(scores, pool_size), axis=1)
    return pools


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of each row's ``k`` largest scores, largest first."""
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def slot_sources(old_pools: np.ndarray, new_pools: np.ndarray) -> np.ndarray:
    """For each slot of each new pool, the slot that held the same item in the row's old pool, else -1.

    Per-slot history (exposures, last time a candidate) follows an item from one day's pool to the next.
    Items are distinct within a pool, so after a stable row sort of old+new a match is an old entry directly
    followed by an equal new one; old pools' sentinel (never computed) entries never match a new one.
    """
    size = new_pools.shape[1]
    both = np.concatenate([old_pools, new_pools], axis=1)
    order = np.argsort(both, axis=1, kind="stable")
    ordered = np.take_along_axis(both, order, axis=1)
    first, second = order[:, :-1], order[:, 1:]
    rows, cols = np.nonzero((ordered[:, 1:] == ordered[:, :-1]) & (first < size) & (second >= size))
    source = np.full(new_pools.shape, -1, dtype=np.int64)
    source[rows, second[rows, cols] - size] = first[rows, cols]
    return source


def sample_slots(
    n_requests: int, pool_size: int, n_candidates: int, rank_decay: float, rng: np.random.Generator
) -> np.ndarray:
    """Per request, ``n_candidates`` distinct pool slots (Gumbel top-k favouring the pool's top), ascending."""
    log_weight = -rank_decay * np.arange(pool_size) / pool_size
    keys = log_weight + rng.gumbel(size=(n_requests, pool_size))
    picked = np.argpartition(-keys, n_candidates - 1, axis=1)[:, :n_candidates]
    return np.sort(picked, axis=1)


def policy_rank(
    stale_affinity: np.ndarray,
    log_popularity: np.ndarray,
    popularity_weight: float,
    n_shown: int,
    noise: float,
    rng: np.random.Generator,
) -> np.ndarray:
    """The logging policy: a stale relevance estimate with noise; returns the shown columns, best first."""
    score = stale_affinity + popularity_weight * log_popularity + noise * rng.gumbel(size=stale_affinity.shape)
    return top_k(score, n_shown)
