"""User aggregate embeddings: the mean of a user's pair embeddings over a trailing window.

The aggregate is the second serving tier: when a (user, item) pair has no fresh embedding, the user's recent
average still carries the user-level part of the FM's signal (the paper reports coverage rising from about
45% to 85-90%). The window is half-open on the left, ``(as_of - window, as_of]``, so consecutive hourly runs
count every pair embedding in exactly the windows it belongs to.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from solaris.data.hourly import as_utc


def _as_datetime64_us(values: np.ndarray, what: str) -> np.ndarray:
    values = np.asarray(values)
    if not np.issubdtype(values.dtype, np.datetime64):
        raise TypeError(f"{what}: expected a numpy datetime64 array (UTC), got dtype {values.dtype}")
    return values.astype("datetime64[us]")


def _utc_datetime64(t: datetime) -> np.datetime64:
    return np.datetime64(as_utc(t).replace(tzinfo=None), "us")


def user_aggregates(
    pair_user_ids: np.ndarray,
    pair_vectors: np.ndarray,
    pair_created_at: np.ndarray,
    as_of: datetime,
    window_hours: float = 24,
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Per-user mean of the pair vectors created in ``(as_of - window_hours, as_of]``.

    ``pair_created_at`` is datetime64 in UTC (numpy has no time zones). Returns ``(user_ids, means,
    pair_counts)`` sorted by user id; users with no pair in the window are absent. Sums are taken in float64
    so that a user with thousands of pairs loses no precision; the means come back as float32.
    """
    users = np.asarray(pair_user_ids, dtype=np.int64)
    vectors = np.asarray(pair_vectors)
    created = _as_datetime64_us(pair_created_at, "pair_created_at")
    if vectors.ndim != 2:
        raise ValueError(f"pair_vectors must be 2-D [pairs, dim], got shape {vectors.shape}")
    if not (len(users) == len(vectors) == len(created)):
        raise ValueError(
            f"pair arrays differ in length: user_ids {len(users)}, vectors {len(vectors)}, created_at {len(created)}"
        )
    if window_hours <= 0:
        raise ValueError(f"window_hours must be positive, got {window_hours}")
    end = _utc_datetime64(as_of)
    start = end - np.timedelta64(int(timedelta(hours=window_hours) / timedelta(microseconds=1)), "us")
    keep = (created > start) & (created <= end)
    users, vectors = users[keep], vectors[keep]
    if not len(users):
        return np.empty(0, np.int64), np.empty((0, vectors.shape[1]), np.float32), np.empty(0, np.int64)
    order = np.argsort(users, kind="stable")
    users = users[order]
    starts = np.flatnonzero(np.r_[True, users[1:] != users[:-1]])
    sums = np.add.reduceat(vectors[order].astype(np.float64), starts, axis=0)
    counts = np.diff(np.r_[starts, len(users)])
    return users[starts], (sums / counts[:, None]).astype(np.float32), counts.astype(np.int64)
