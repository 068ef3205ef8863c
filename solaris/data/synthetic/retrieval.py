"""The serving funnel in front of the ranker: a daily retrieval pool per user, candidates per request drawn
from it, and the logging policy that picks what is shown.

Drawing every request of a day from the same per-user pool is what makes a user's candidates overlap across
hours, which is the property speculative precompute lives on.
"""

from __future__ import annotations

import numpy as np

from solaris.data.synthetic.population import unit_rows

# Scores are computed for this many (user, item) pairs at a time, bounding memory for large worlds.
_SCORE_CHUNK = 1 << 22


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

    Returns (n_users, pool_size) int32 item ids in retrieval order (best first).
    """
    n, d = user_latent.shape
    query = unit_rows(user_latent + (noise / np.sqrt(d)) * rng.standard_normal((n, d)).astype(np.float32))
    prior = (popularity_weight * log_popularity).astype(np.float32)
    pools = np.empty((n, pool_size), dtype=np.int32)
    step = max(1, _SCORE_CHUNK // len(item_latent))
    for lo in range(0, n, step):
        scores = query[lo : lo + step] @ item_latent.T + prior
        pools[lo : lo + step] = top_k(scores, pool_size)
    return pools


def top_k(scores: np.ndarray, k: int) -> np.ndarray:
    """Column indices of each row's ``k`` largest scores, largest first."""
    part = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    order = np.argsort(-np.take_along_axis(scores, part, axis=1), axis=1, kind="stable")
    return np.take_along_axis(part, order, axis=1)


def slot_sources(old_pools: np.ndarray, new_pools: np.ndarray, n_items: int) -> np.ndarray:
    """For each slot of each new pool, the slot that held the same item in the row's old pool, else -1.

    Per-slot history (exposures, last time a candidate) follows an item from one day's pool to the next.
    Old pools may hold the sentinel ``n_items`` (never computed); it matches nothing.
    """
    rows, size = new_pools.shape
    stride = np.int64(n_items + 1)
    offsets = np.arange(rows, dtype=np.int64)[:, None] * stride
    old_keys = offsets + old_pools
    order = np.argsort(old_keys, axis=1, kind="stable")
    sorted_keys = np.take_along_axis(old_keys, order, axis=1).ravel()
    new_keys = (offsets + new_pools).ravel()
    pos = np.minimum(np.searchsorted(sorted_keys, new_keys), sorted_keys.size - 1)
    found = sorted_keys[pos] == new_keys
    source = np.where(found, order.ravel()[pos], -1)
    return source.reshape(rows, size)


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
