"""Grouping and ranking on integer arrays, the numpy way, for frames of millions of pairs.

Pandas multi-column sorts, ``groupby().cumcount()`` and ``np.lexsort`` all cost several seconds on a few
million rows on our 2-core workers; a stable argsort of one composite int64 key does the same job about
ten times faster, so everything here reduces to that.
"""

from __future__ import annotations

import numpy as np


def group_rank(grouped: np.ndarray) -> np.ndarray:
    """0, 1, 2, ... within each run of equal values of an array whose equal values are adjacent."""
    n = len(grouped)
    starts = np.flatnonzero(np.r_[True, grouped[1:] != grouped[:-1]]) if n else np.empty(0, np.int64)
    return np.arange(n) - np.repeat(starts, np.diff(np.r_[starts, n]))


def order_by(major: np.ndarray, minor: np.ndarray) -> np.ndarray:
    """Stable order by (major, minor), both non-negative integers."""
    span = int(minor.max(initial=0)) + 1
    if int(major.max(initial=0)) > (np.iinfo(np.int64).max - span) // span:
        raise OverflowError(f"sort key beyond int64: major up to {major.max()}, minor up to {span - 1}")
    return np.argsort(major.astype(np.int64) * span + minor, kind="stable")


def first_per_key(keys: np.ndarray) -> np.ndarray:
    """Indices of the first occurrence of each key, in their original order (so rows given best first
    keep their best occurrence)."""
    return np.sort(np.unique(keys, return_index=True)[1])


def pair_keys(user_ids: np.ndarray, item_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One int64 per (user, item) pair, sorting as the pairs do and equal iff the pairs are; also the
    dense user codes (0..users-1, in user id order) they were built from."""
    _, user_codes = np.unique(user_ids, return_inverse=True)
    items, item_codes = np.unique(item_ids, return_inverse=True)
    return user_codes.astype(np.int64) * len(items) + item_codes, user_codes
