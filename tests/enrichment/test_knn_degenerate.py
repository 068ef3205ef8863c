"""A zero or non-finite vector has no cosine: its user gets an empty row and lends none, and the rows of the
others are what they would be without it (an id the FM never trained on can have an exactly zero vector)."""

from __future__ import annotations

import numpy as np
import pytest

from solaris.enrichment.knn import EXACT_THRESHOLD, PAD_ID, build_neighbours, degenerate

K = 5


def with_degenerate_rows(seed: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Shuffled ids, clustered vectors, and which rows were made degenerate: zero, NaN, +-inf, and one whose
    finite values overflow a float32 norm."""
    rng = np.random.default_rng(seed)
    n = 300
    ids = rng.permutation(np.arange(n) * 3 + 7)
    vectors = (rng.normal(size=(8, 16))[rng.integers(0, 8, n)] + 0.3 * rng.normal(size=(n, 16))).astype(np.float32)
    bad = rng.choice(n, 25, replace=False)
    vectors[bad[:10]] = 0.0
    vectors[bad[10:15], 3] = np.nan
    vectors[bad[15:20], 0] = np.inf
    vectors[bad[20:24], 5] = -np.inf
    vectors[bad[24]] = 1e30
    mask = np.zeros(n, bool)
    mask[bad] = True
    return ids, vectors, mask


@pytest.mark.parametrize("exact_threshold", [EXACT_THRESHOLD, 0])  # a flat index and an HNSW graph
@pytest.mark.parametrize("pooled", [False, True])
def test_degenerate_vectors_get_no_neighbours_and_lend_none(exact_threshold: int, pooled: bool) -> None:
    ids, vectors, bad = with_degenerate_rows(seed=3)
    pool = ids[::2] if pooled else None  # half the pool's users are valid, some degenerate ones are in it
    assert not pooled or np.isin(ids[bad], pool).any()
    np.testing.assert_array_equal(degenerate(vectors), bad)

    table = build_neighbours(ids, vectors, K, pool=pool, exact_threshold=exact_threshold)

    np.testing.assert_array_equal(table.user_ids, np.sort(ids))  # every user keeps a row
    empty = table.rows(ids[bad])
    assert (empty.neighbour_ids == PAD_ID).all() and (empty.similarities == 0).all()
    assert not np.isin(table.neighbour_ids, ids[bad]).any(), "a degenerate vector lends no neighbour"
    assert np.isfinite(table.similarities).all()
    valid_pool = None if pool is None else pool[~np.isin(pool, ids[bad])]
    without = build_neighbours(ids[~bad], vectors[~bad], K, pool=valid_pool, exact_threshold=exact_threshold)
    kept = table.rows(without.user_ids)
    np.testing.assert_array_equal(kept.neighbour_ids, without.neighbour_ids)
    np.testing.assert_array_equal(kept.similarities, without.similarities)
    assert (kept.neighbour_ids != PAD_ID).all()


def test_only_degenerate_vectors_give_only_empty_rows() -> None:
    vectors = np.array([[0, 0], [np.nan, 1], [np.inf, 0]], np.float32)
    table = build_neighbours(np.array([4, 5, 6]), vectors, k=2, pool=np.array([4, 5]))
    assert degenerate(vectors).all()
    assert (table.neighbour_ids == PAD_ID).all() and (table.similarities == 0).all()


def test_a_degenerate_vector_fills_no_slot_of_a_short_row() -> None:
    """With fewer valid candidates than ``k``, the slot a zero vector (inner product 0) would take stays padded."""
    vectors = np.array([[1, 0], [1, 1], [0, 0]], np.float32)
    table = build_neighbours(np.array([1, 2, 3]), vectors, k=2)
    np.testing.assert_array_equal(table.neighbour_ids, [[2, PAD_ID], [1, PAD_ID], [PAD_ID, PAD_ID]])
