"""Conversions at the store boundary: aware datetimes <-> epoch microseconds, vectors <-> little-endian bytes.

Integer microseconds keep the point-in-time comparison exact on both backends (``created_at <= t < expires_at``,
no float rounding).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

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
