"""Assembling tier rows from the database into dense, model-ready arrays (pure numpy, no per-row Python).

Requests are deduplicated before they are sent, and answers are matched back by integer pair codes
(rank of user x number of items + rank of item), which is an order of magnitude faster than matching
structured (user, item) records.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np


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
    """Per position, ``sum_j w_j v_j / sum_j w_j`` over its rows (weights must be > 0), and the mask."""
    total = np.zeros((size, vectors.shape[1]), dtype=np.float64)
    weight = np.zeros(size, dtype=np.float64)
    np.add.at(total, positions, vectors * weights[:, None])
    np.add.at(weight, positions, weights)
    mask = weight > 0
    total[mask] /= weight[mask, None]
    return total.astype(np.float32), mask
