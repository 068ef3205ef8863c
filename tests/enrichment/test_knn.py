from __future__ import annotations

import numpy as np
import pytest

from solaris.enrichment.knn import PAD_ID, build_neighbours, users_to_requery


def clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    return (centres[rng.integers(0, clusters, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


def brute_force(ids: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return ids[top], np.take_along_axis(sims, top, axis=1)


def test_exact_matches_brute_force_and_excludes_self() -> None:
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.arange(500) * 7 + 3)
    vectors = rng.normal(size=(500, 16)).astype(np.float32)
    table = build_neighbours(ids, vectors, k=8)
    order = np.argsort(ids)
    want_ids, want_sims = brute_force(ids[order], vectors[order], 8)
    np.testing.assert_array_equal(table.user_ids, ids[order])
    np.testing.assert_array_equal(table.neighbour_ids, want_ids)
    np.testing.assert_allclose(table.similarities, want_sims, atol=1e-5)
    assert not (table.neighbour_ids == table.user_ids[:, None]).any()


def test_identical_vectors_are_each_others_neighbour_not_their_own() -> None:
    vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    table = build_neighbours(np.array([10, 11, 12]), vectors, k=1)
    assert table.neighbour_ids[:, 0].tolist()[:2] == [11, 10]
    np.testing.assert_allclose(table.similarities[:2, 0], [1.0, 1.0])


def test_fewer_users_than_k_pads_with_minus_one_and_zero() -> None:
    table = build_neighbours(np.array([1, 2, 3]), np.eye(3, dtype=np.float32) + 0.1, k=4)
    assert (table.neighbour_ids[:, 2:] == PAD_ID).all() and (table.similarities[:, 2:] == 0).all()
    assert (table.neighbour_ids[:, :2] != PAD_ID).all()


def test_hnsw_recall_on_clustered_vectors() -> None:
    ids = np.arange(3000)
    vectors = clustered(3000, 16, clusters=30, seed=1)
    approx = build_neighbours(ids, vectors, k=10, exact_threshold=1000, ef_search=64)
    exact = build_neighbours(ids, vectors, k=10, exact_threshold=10_000)
    hits = [len(np.intersect1d(a, e)) for a, e in zip(approx.neighbour_ids, exact.neighbour_ids, strict=True)]
    assert np.sum(hits) / exact.neighbour_ids.size >= 0.9


def test_incremental_update_requeries_only_what_changed_and_matches_a_full_rebuild() -> None:
    rng = np.random.default_rng(2)
    ids = np.arange(1000)
    before = clustered(1000, 8, clusters=10, seed=3)
    previous = build_neighbours(ids, before, k=5)
    after = before.copy()
    changed = rng.choice(ids, 50, replace=False)
    after[changed] = clustered(50, 8, clusters=10, seed=4)
    # User 0 leaves; users 1000-1009 arrive.
    now_ids = np.r_[ids[1:], np.arange(1000, 1010)]
    now = np.r_[after[1:], clustered(10, 8, clusters=10, seed=5)]

    requery = users_to_requery(now_ids, changed, previous, k=5)
    lost_zero = previous.user_ids[(previous.neighbour_ids == 0).any(axis=1)]
    assert set(requery) == (set(changed) | set(range(1000, 1010)) | set(lost_zero)) - {0}

    incremental = build_neighbours(now_ids, now, k=5, previous=previous, changed_user_ids=changed)
    full = build_neighbours(now_ids, now, k=5)
    redone = incremental.rows(requery)
    np.testing.assert_array_equal(redone.neighbour_ids, full.rows(requery).neighbour_ids)
    kept = np.setdiff1d(now_ids, requery)
    np.testing.assert_array_equal(incremental.rows(kept).neighbour_ids, previous.rows(kept).neighbour_ids)
    assert not (incremental.neighbour_ids == 0).any(), "a departed user is still someone's neighbour"
    rebuilt = build_neighbours(
        now_ids, now, k=5, previous=previous, changed_user_ids=changed, full_rebuild=True
    )
    np.testing.assert_array_equal(rebuilt.neighbour_ids, full.neighbour_ids)


def test_bad_inputs_are_refused_with_the_user() -> None:
    vectors = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="user 2 appears more than once"):
        build_neighbours(np.array([1, 2, 2]), vectors, k=1)
    with pytest.raises(ValueError, match="user 3 has a zero or non-finite vector"):
        build_neighbours(np.array([1, 2, 3]), np.r_[vectors[:2], [[0, 0]]], k=1)
    previous = build_neighbours(np.array([1, 2, 3]), vectors, k=1)
    with pytest.raises(ValueError, match="needs changed_user_ids"):
        build_neighbours(np.array([1, 2, 3]), vectors, k=1, previous=previous)
    with pytest.raises(ValueError, match="k=1, asked for k=2"):
        build_neighbours(np.array([1, 2, 3]), vectors, k=2, previous=previous, changed_user_ids=np.array([1]))
    with pytest.raises(KeyError, match="user 9"):
        previous.rows(np.array([9]))


def test_an_update_with_nothing_changed_reuses_every_row() -> None:
    ids, vectors = np.arange(200), clustered(200, 8, clusters=5, seed=6)
    previous = build_neighbours(ids, vectors, k=4)
    # Vectors that moved but were not reported as changed keep their old rows: the caller decides.
    moved = clustered(200, 8, clusters=5, seed=7)
    assert users_to_requery(ids, np.array([], np.int64), previous, k=4).size == 0
    same = build_neighbours(ids, moved, k=4, previous=previous, changed_user_ids=np.array([], np.int64))
    np.testing.assert_array_equal(same.neighbour_ids, previous.neighbour_ids)


def test_no_users_gives_an_empty_table() -> None:
    table = build_neighbours(np.empty(0, np.int64), np.empty((0, 4), np.float32), k=3)
    assert table.user_ids.shape == (0,) and table.neighbour_ids.shape == (0, 3)


def test_requerying_neighbours_of_changed_users_drops_neighbours_that_moved_away() -> None:
    ids, before = np.arange(600), clustered(600, 8, clusters=6, seed=8)
    previous = build_neighbours(ids, before, k=5)
    changed = np.arange(0, 600, 20)
    after = before.copy()
    after[changed] = clustered(len(changed), 8, clusters=6, seed=9)
    holders = ids[np.isin(previous.neighbour_ids, changed).any(axis=1)]
    requery = users_to_requery(ids, changed, previous, k=5, neighbours_of_changed=True)
    np.testing.assert_array_equal(requery, np.union1d(changed, holders))
    table = build_neighbours(
        ids, after, k=5, previous=previous, changed_user_ids=changed, requery_neighbours_of_changed=True
    )
    full = build_neighbours(ids, after, k=5)
    np.testing.assert_array_equal(table.rows(requery).neighbour_ids, full.rows(requery).neighbour_ids)
    kept = np.setdiff1d(ids, requery)
    assert not np.isin(table.rows(kept).neighbour_ids, changed).any()
