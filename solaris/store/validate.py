"""Checks a write batch whole before any of it reaches the database, so a refused batch writes nothing.

Each error names the argument and the first offending row, so a precompute failure points at its data.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from solaris.data.idmap import UNKNOWN
from solaris.store.codec import EXPOSURE_WIDTH, encode_exposure, encode_vectors, to_micros
from solaris.store.errors import StoreError
from solaris.store.records import EmbeddingVersion, ExposureCounts


@dataclass(frozen=True)
class Stamp:
    """What every row of one batch shares."""

    run_id: str
    version: str
    created_at: int
    expires_at: int


@dataclass(frozen=True)
class PairBatch:
    stamp: Stamp
    user_ids: np.ndarray
    item_ids: np.ndarray
    vectors: np.ndarray  # fixed-width bytes
    scores: np.ndarray


@dataclass(frozen=True)
class AggregateBatch:
    stamp: Stamp
    user_ids: np.ndarray
    vectors: np.ndarray  # fixed-width bytes
    pair_counts: np.ndarray
    window_hours: int


@dataclass(frozen=True)
class NeighbourBatch:
    """Neighbour lists of users or of items (their owners)."""

    stamp: Stamp
    owners: np.ndarray  # every listed owner: their old lists are replaced, even by an empty one
    owner_ids: np.ndarray  # one row per (owner, neighbour), padding removed
    neighbour_ids: np.ndarray
    similarities: np.ndarray


@dataclass(frozen=True)
class ExposureBatch:
    """Users' exposure counters in user order, each user's packed (:func:`~solaris.store.codec.encode_exposure`)."""

    run_id: str
    created_at: int
    expires_at: int
    user_ids: np.ndarray
    item_counts: np.ndarray  # pairs per user
    counts: list[bytes]

    def rows(self) -> list[tuple]:
        """(user_id, counts, item_count, created_at, expires_at, run_id) per user, as the upserts bind them."""
        times = (self.created_at, self.expires_at, self.run_id)
        per_user = zip(self.user_ids.tolist(), self.counts, self.item_counts.tolist(), strict=True)
        return [(user, packed, n, *times) for user, packed, n in per_user]


def run_times(run_id: str, created_at: datetime, expires_at: datetime) -> tuple[int, int]:
    """What every batch's rows share, checked: a run id, and (as micros) a creation then a later expiry."""
    if not isinstance(run_id, str) or not run_id:
        raise StoreError(f"run_id must be a non-empty string, got {run_id!r}")
    created, expires = to_micros(created_at, "created_at"), to_micros(expires_at, "expires_at")
    if expires <= created:
        raise StoreError(f"expires_at={expires_at.isoformat()} is not after created_at={created_at.isoformat()}")
    return created, expires


def stamp(run_id: str, version: EmbeddingVersion, created_at: datetime, expires_at: datetime) -> Stamp:
    return Stamp(run_id, version.version_id, *run_times(run_id, created_at, expires_at))


def ids(values: np.ndarray, name: str, n: int | None = None, lowest: int = 0) -> np.ndarray:
    """Ids as a 1-D int64 array; a read passes ``lowest=UNKNOWN`` (:func:`read_ids`)."""
    arr = np.asarray(values)
    if arr.ndim != 1 or (arr.size and arr.dtype.kind not in "iu"):
        raise StoreError(f"{name} must be a 1-D integer array, got shape {arr.shape} dtype {arr.dtype}")
    if n is not None and len(arr) != n:
        raise StoreError(f"{name} has {len(arr)} rows, expected {n}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < lowest:
        below = "negative" if lowest == 0 else f"below {lowest}"
        raise StoreError(f"{name} row {int(np.argmin(arr))} is {below} ({int(arr.min())})")
    return arr


def finite_rows(values: np.ndarray, dtype: str) -> np.ndarray:
    """Per row, whether every value is finite once stored as ``dtype`` (float16 turns 1e5 into inf): the rule
    :func:`finite` refuses a whole batch by, for a writer that skips and counts the rows it would refuse."""
    with np.errstate(over="ignore"):  # an overflow becomes inf, which this check reports
        cast = np.asarray(values).astype(dtype)
    return np.isfinite(cast.reshape(len(cast), -1)).all(axis=1) if cast.size else np.ones(len(cast), bool)


def read_ids(values: np.ndarray, name: str, n: int | None = None) -> np.ndarray:
    """Ids to read: as written, or ``UNKNOWN`` (a request's raw id its world's id map lacks), which no row holds
    and so reads as absent (served cold)."""
    return ids(values, name, n, lowest=UNKNOWN)


def finite(values: np.ndarray, name: str, shape: tuple[int, ...], dtype: str = "float32") -> np.ndarray:
    arr = np.asarray(values)
    if arr.shape != shape:
        raise StoreError(f"{name} has shape {arr.shape}, expected {shape}")
    if arr.size and arr.dtype.kind not in "fiu":
        raise StoreError(f"{name} must be numeric, got dtype {arr.dtype}")
    bad = ~finite_rows(arr, dtype)
    if bad.any():
        raise StoreError(f"{name} row {int(np.argmax(bad))} holds NaN or infinite values (as {dtype})")
    return arr.astype(dtype)


def window_counts(values: np.ndarray, name: str, n: int) -> np.ndarray:
    """[n, windows] non-negative integer counts, one column per window of :data:`solaris.exposure.WINDOWS_H`."""
    arr = np.asarray(values)
    if arr.shape != (n, EXPOSURE_WIDTH):
        raise StoreError(f"{name} has shape {arr.shape}, expected {(n, EXPOSURE_WIDTH)}: one column per window")
    if arr.size and arr.dtype.kind not in "iu":
        raise StoreError(f"{name} must hold integer counts, got dtype {arr.dtype}")
    arr = arr.astype(np.int64)
    if arr.size and arr.min() < 0:
        raise StoreError(f"{name} row {int(np.argmin(arr.min(axis=1)))} holds a negative count ({int(arr.min())})")
    return arr


def vectors(values: np.ndarray, version: EmbeddingVersion, n: int) -> np.ndarray:
    arr = np.asarray(values)
    if arr.ndim != 2 or len(arr) != n:
        raise StoreError(f"vectors must be [{n}, {version.dim}], got shape {arr.shape}")
    if arr.shape[1] != version.dim:
        raise StoreError(
            f"vectors have dimension {arr.shape[1]}, embedding version {version.version_id} has {version.dim}"
        )
    return encode_vectors(finite(arr, "vectors", arr.shape, version.dtype), version.dtype)


def unique_keys(columns: list[np.ndarray], name: str) -> None:
    """Refuses a batch that writes one key twice: which row would win is undefined in one statement."""
    if len(columns[0]) < 2:
        return
    order = np.lexsort(columns[::-1])
    same = np.ones(len(order) - 1, dtype=bool)
    for column in columns:
        ordered = column[order]
        same &= ordered[1:] == ordered[:-1]
    if same.any():
        at = int(np.argmax(same))
        first, second = sorted((int(order[at]), int(order[at + 1])))
        key = [int(column[first]) for column in columns]
        raise StoreError(f"{name} {key} appears twice in the batch, at rows {first} and {second}")


def pair_batch(
    stamp_: Stamp,
    version: EmbeddingVersion,
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    vectors_: np.ndarray,
    scores: np.ndarray,
) -> PairBatch:
    users = ids(user_ids, "user_ids")
    items = ids(item_ids, "item_ids", len(users))
    unique_keys([users, items], "(user_id, item_id)")
    return PairBatch(
        stamp_, users, items, vectors(vectors_, version, len(users)), finite(scores, "scores", (len(users),))
    )


def aggregate_batch(
    stamp_: Stamp,
    version: EmbeddingVersion,
    user_ids: np.ndarray,
    vectors_: np.ndarray,
    pair_counts: np.ndarray,
    window_hours: int,
) -> AggregateBatch:
    users = ids(user_ids, "user_ids")
    unique_keys([users], "user_id")
    counts = ids(pair_counts, "pair_counts", len(users))
    if not isinstance(window_hours, int | np.integer) or window_hours <= 0:
        raise StoreError(f"window_hours must be a positive integer, got {window_hours!r}")
    return AggregateBatch(stamp_, users, vectors(vectors_, version, len(users)), counts, int(window_hours))


def neighbour_batch(
    stamp_: Stamp, owner_ids: np.ndarray, neighbour_ids: np.ndarray, similarities: np.ndarray, owner: str = "user"
) -> NeighbourBatch:
    """``owner`` ("user" or "item") names the ids in the errors."""
    owners = ids(owner_ids, f"{owner}_ids")
    unique_keys([owners], f"{owner}_id")
    neighbours = np.asarray(neighbour_ids)
    integers = not neighbours.size or neighbours.dtype.kind in "iu"
    if neighbours.ndim != 2 or len(neighbours) != len(owners) or not integers:
        raise StoreError(
            f"neighbour_ids must be a 2-D integer array with {len(owners)} rows, got shape {neighbours.shape}"
        )
    neighbours = neighbours.astype(np.int64)
    sims = finite(similarities, "similarities", neighbours.shape)
    row, col = np.nonzero(neighbours != -1)
    flat = neighbours[row, col]
    if flat.size and flat.min() < 0:
        raise StoreError(f"neighbour_ids row {int(row[np.argmin(flat)])} holds {int(flat.min())}; pad with -1 only")
    if (flat == owners[row]).any():
        raise StoreError(f"neighbour_ids row {int(row[np.argmax(flat == owners[row])])} lists the {owner} itself")
    unique_keys([owners[row], flat], f"({owner}_id, neighbour_id)")
    return NeighbourBatch(stamp_, owners, owners[row], flat, sims[row, col])


def exposure_batch(run_id: str, created_at: datetime, expires_at: datetime, batch: ExposureCounts) -> ExposureBatch:
    """The users sorted, each one's pairs sorted by item, so a rerun of the same counts stores the same bytes."""
    created, expires = run_times(run_id, created_at, expires_at)
    users = ids(batch.user_ids, "user_ids")
    unique_keys([users], "user_id")
    user_counts = window_counts(batch.user_counts, "user_counts", len(users))
    pair_users = ids(batch.pair_user_ids, "pair_user_ids")
    items = ids(batch.pair_item_ids, "pair_item_ids", len(pair_users))
    pair_counts = window_counts(batch.pair_counts, "pair_counts", len(pair_users))
    unlisted = ~np.isin(pair_users, users)
    if unlisted.any():
        at = int(np.argmax(unlisted))
        raise StoreError(f"pair_user_ids row {at} is user {int(pair_users[at])}, which user_ids does not list")
    unique_keys([pair_users, items], "(user_id, item_id)")
    order = np.argsort(users)
    users = users[order]
    owner = np.searchsorted(users, pair_users)
    by_user = np.lexsort((items, owner))
    slots = np.bincount(owner, minlength=len(users))
    try:
        packed = encode_exposure(user_counts[order], slots, items[by_user], pair_counts[by_user])
    except ValueError as error:
        raise StoreError(f"exposure counts: {error}") from None
    return ExposureBatch(run_id, created, expires, users, slots, packed)
