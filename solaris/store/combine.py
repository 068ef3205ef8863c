"""Assembling tier rows from the database into dense, model-ready arrays (pure numpy, no per-row Python).

Requests are deduplicated before they are sent, and answers are matched back by integer pair codes
(rank of user x number of items + rank of item), which is an order of magnitude faster than matching
structured (user, item) records.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import numpy as np

from solaris.store.base import TierBatchRead
from solaris.store.codec import decode_vectors


@dataclass(frozen=True)
class PairIndex:
    """The distinct (user, item) pairs of a request, and where each requested row finds its answer."""

    users: np.ndarray  # sorted distinct user ids
    items: np.ndarray  # sorted distinct item ids
    codes: np.ndarray  # sorted distinct pair codes
    inverse: np.ndarray  # requested row -> position in ``codes``

    @classmethod
    def build(cls, user_ids: np.ndarray, item_ids: np.ndarray) -> PairIndex:
        users, user_rank = np.unique(user_ids, return_inverse=True)
        items, item_rank = np.unique(item_ids, return_inverse=True)
        codes, inverse = np.unique(user_rank * len(items) + item_rank, return_inverse=True)
        return cls(users, items, codes, inverse.ravel())

    @property
    def user_rank(self) -> np.ndarray:
        """For each distinct pair, its user's position in ``users``."""
        return self.codes // max(len(self.items), 1)

    def locate(self, user_ids: np.ndarray, item_ids: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        """For answered rows whose user and item were requested: which rows are requested pairs (a backend
        may answer the users x items cross product), and their positions in ``codes``."""
        code = np.searchsorted(self.users, user_ids) * len(self.items) + np.searchsorted(self.items, item_ids)
        position = np.minimum(np.searchsorted(self.codes, code), max(len(self.codes) - 1, 0))
        requested = self.codes[position] == code if len(self.codes) else np.zeros(len(code), dtype=bool)
        return requested, position[requested]


def scatter(positions: np.ndarray, vectors: np.ndarray, size: int) -> tuple[np.ndarray, np.ndarray]:
    """Dense [size, d] with ``vectors`` at ``positions`` (zeros elsewhere) and the presence mask."""
    dense = np.zeros((size, vectors.shape[1]), dtype=np.float32)
    mask = np.zeros(size, dtype=bool)
    dense[positions] = vectors
    mask[positions] = True
    return dense, mask


def weighted_mean(
    positions: np.ndarray, weights: np.ndarray, vectors: np.ndarray, size: int
) -> tuple[np.ndarray, np.ndarray]:
    """Per position, ``sum_j w_j v_j / sum_j w_j`` over its rows (weights must be > 0), and the mask.

    Sums by ``bincount`` over flat (position, dimension) cells: 2-3x faster than ``np.add.at`` on rows.
    """
    dim = vectors.shape[1]
    cells = (positions[:, None] * dim + np.arange(dim)).ravel()
    total = np.bincount(cells, (vectors * weights[:, None]).ravel(), minlength=size * dim).reshape(size, dim)
    weight = np.bincount(positions, weights, minlength=size)
    mask = weight > 0
    return (total / np.where(mask, weight, 1.0)[:, None]).astype(np.float32), mask


PAIR_TIER, AGGREGATE_TIER, NEIGHBOUR_TIER, A2A_TIER = 0, 1, 2, 3


@dataclass(frozen=True)
class TierRows:
    """The tagged rows of ``read_tiers.sql`` as columns, row i across all of them; ``vectors`` holds the
    rows' vector bytes back to back."""

    tier: np.ndarray
    user_ids: np.ndarray
    item_ids: np.ndarray
    similarity: np.ndarray
    vectors: bytes

    @classmethod
    def from_rows(cls, rows: Sequence[tuple]) -> TierRows:
        """From ``(tier, user, item, similarity, vector)`` tuples: columns split once, bytes joined once."""
        tier, users, items, similarity, blobs = zip(*rows, strict=True) if rows else ((),) * 5
        return cls(
            np.array(tier, dtype=np.int8), np.array(users, dtype=np.int64), np.array(items, dtype=np.int64),
            np.array(similarity, dtype=np.float64), b"".join(blobs),
        )


def assemble(index: PairIndex, rows: TierRows, dim: int, dtype: str) -> TierBatchRead:
    """The batch read from the tagged rows: every vector decoded by one ``frombuffer``; the neighbour and
    A2A tiers are :func:`weighted_mean` over each requested pair's rows of that tier."""
    vectors = decode_vectors(rows.vectors, dim, dtype)
    if len(vectors) != len(rows.tier):
        raise ValueError(f"{len(rows.tier)} tier rows came with {len(vectors)} vectors")
    size = len(index.codes)

    def pair_rows(which: int) -> tuple[np.ndarray, np.ndarray]:
        """The rows of a pair-keyed tier that answer a requested pair, and those pairs' positions."""
        rows_of = np.flatnonzero(rows.tier == which)
        keep, at = index.locate(rows.user_ids[rows_of], rows.item_ids[rows_of])
        return rows_of[keep], at

    rows_of, at = pair_rows(PAIR_TIER)
    pair, pair_mask = scatter(at, vectors[rows_of], size)
    rows_of, at = pair_rows(NEIGHBOUR_TIER)
    knn, knn_mask = weighted_mean(at, rows.similarity[rows_of].astype(np.float64), vectors[rows_of], size)
    rows_of, at = pair_rows(A2A_TIER)
    a2a, a2a_mask = weighted_mean(at, rows.similarity[rows_of].astype(np.float64), vectors[rows_of], size)
    rows_of = np.flatnonzero(rows.tier == AGGREGATE_TIER)
    user_agg, user_mask = scatter(
        np.searchsorted(index.users, rows.user_ids[rows_of]), vectors[rows_of], len(index.users)
    )
    row = index.inverse
    row_user = index.user_rank[row]
    return TierBatchRead(
        pair[row], pair_mask[row], user_agg[row_user], user_mask[row_user], knn[row], knn_mask[row], a2a[row],
        a2a_mask[row],
    )
