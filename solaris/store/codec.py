"""Conversions at the store boundary: aware datetimes <-> epoch microseconds, vectors <-> little-endian bytes.

Integer microseconds keep the point-in-time comparison exact on both backends (``created_at <= t < expires_at``,
no float rounding).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from solaris import exposure
from solaris.embedding_version import VECTOR_DTYPES

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
MICROS_PER_HOUR = 3_600_000_000


def to_micros(value: datetime, field: str) -> int:
    if not isinstance(value, datetime):
        raise TypeError(f"{field}: expected a timezone-aware datetime, got {type(value).__name__}")
    if value.tzinfo is None or value.utcoffset() is None:
        raise ValueError(f"{field}={value.isoformat()} is naive; pass a timezone-aware (UTC) datetime")
    return (value - EPOCH) // timedelta(microseconds=1)


def from_micros(value: int | None) -> datetime | None:
    return None if value is None else EPOCH + timedelta(microseconds=int(value))


def storage_dtype(dtype: str) -> np.dtype:
    if dtype not in VECTOR_DTYPES:
        raise ValueError(f"vector dtype {dtype!r} is not one of {', '.join(VECTOR_DTYPES)}")
    return np.dtype(dtype).newbyteorder("<")


def encode_vectors(vectors: np.ndarray, dtype: str) -> np.ndarray:
    """Rows as fixed-width byte strings (numpy ``V`` dtype): one buffer, no per-row Python work."""
    packed = np.ascontiguousarray(vectors, dtype=storage_dtype(dtype))
    return packed.view(f"V{packed.shape[1] * packed.itemsize}").ravel()


def decode_vectors(data: bytes, dim: int, dtype: str) -> np.ndarray:
    """Vectors stored back to back (``dim`` values each) as a float32 [n, dim] array."""
    flat = np.frombuffer(data, dtype=storage_dtype(dtype))
    if flat.size % dim:
        raise ValueError(f"{len(data)} bytes of {dtype} vectors do not split into rows of {dim} values")
    return flat.reshape(-1, dim).astype(np.float32)


LIST_ID_LIMIT = 2**31  # list ids are stored as int32


def encode_lists(neighbour_ids: np.ndarray, similarities: np.ndarray) -> list[bytes]:
    """Each row's ``k`` neighbour ids (int32, -1 for an empty slot) then their ``k`` similarities (float32),
    little-endian: one owner's list as one value, so a read fetches one row per owner, not ``k``."""
    ids = np.asarray(neighbour_ids, np.int64)
    if ids.size and ids.max() >= LIST_ID_LIMIT:
        raise ValueError(f"neighbour id {int(ids.max())} does not fit a list (ids below 2^31)")
    packed = np.concatenate([ids.astype("<i4"), np.asarray(similarities, "<f4").view("<i4")], axis=1)
    return [row.tobytes() for row in packed]


def decode_lists(data: bytes, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Lists stored back to back, list r holding ``slots[r]`` entries: each entry's id and similarity, in
    list order. Entry e of a list starting at entry s sits at word e + s (the s ids and s similarities of
    the lists before it), its similarity ``slots`` words later."""
    slots = np.asarray(slots, np.int64)
    words = np.frombuffer(data, dtype="<i4")
    if len(words) != 2 * slots.sum():
        raise ValueError(f"{len(data)} bytes do not hold lists of {slots.tolist()} entries")
    at = np.arange(slots.sum()) + np.repeat(np.cumsum(slots) - slots, slots)
    return words[at].astype(np.int64), words[at + np.repeat(slots, slots)].view("<f4").astype(np.float64)


EXPOSURE_WIDTH = len(exposure.WINDOWS_H)  # counts per user, and per pair


def exposure_words(slots: np.ndarray) -> np.ndarray:
    """The int32 words of each user's packed counters, for ``slots`` pairs each."""
    return EXPOSURE_WIDTH + np.asarray(slots, np.int64) * (1 + EXPOSURE_WIDTH)


def _exposure_layout(slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Where the words of users packed back to back lie: each user's counts, each pair's item id, each pair's
    counts (pairs in user order), as word positions ([n, W], [m], [m, W])."""
    slots = np.asarray(slots, np.int64)
    sizes = exposure_words(slots)
    starts = np.cumsum(sizes) - sizes
    rank = np.arange(slots.sum()) - np.repeat(np.cumsum(slots) - slots, slots)  # a pair's place in its user
    item_at = np.repeat(starts + EXPOSURE_WIDTH, slots) + rank
    window = np.arange(EXPOSURE_WIDTH)
    pair_at = (np.repeat(starts + EXPOSURE_WIDTH + slots, slots) + rank * EXPOSURE_WIDTH)[:, None] + window
    return starts[:, None] + window, item_at, pair_at


def encode_exposure(
    user_counts: np.ndarray, slots: np.ndarray, item_ids: np.ndarray, pair_counts: np.ndarray
) -> list[bytes]:
    """Each user's W counts, then its ``slots`` item ids, then their W counts each (row-major by item), as
    little-endian int32: one user's counters as one value, read with its user. Pairs come in user order."""
    values = np.concatenate([np.ravel(user_counts), np.ravel(item_ids), np.ravel(pair_counts)]).astype(np.int64)
    if values.size and values.max() >= LIST_ID_LIMIT:
        raise ValueError(f"an item id or count of {int(values.max())} does not fit the counters (int32)")
    user_at, item_at, pair_at = _exposure_layout(slots)
    sizes = exposure_words(slots)
    words = np.empty(int(sizes.sum()), "<i4")
    words[user_at], words[item_at], words[pair_at] = user_counts, item_ids, pair_counts
    return [words[end - size : end].tobytes() for end, size in zip(np.cumsum(sizes).tolist(), sizes.tolist())]


def decode_exposure(data: bytes, slots: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Users' counters stored back to back, user r holding ``slots[r]`` pairs: the users' counts [n, W], the
    pairs' item ids [m] and counts [m, W], pairs in user order."""
    words = np.frombuffer(data, dtype="<i4")
    if len(words) != exposure_words(slots).sum():
        raise ValueError(f"{len(data)} bytes do not hold counters of {np.asarray(slots).tolist()} pairs")
    user_at, item_at, pair_at = _exposure_layout(slots)
    return words[user_at].astype(np.int64), words[item_at].astype(np.int64), words[pair_at].astype(np.int64)
