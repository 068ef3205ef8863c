"""The serving read: TTL at the boundary, version isolation, and each tier's combination rule."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0, vecs

from solaris.store import FeatureStore, StoreError


def put_pairs(store: FeatureStore, version: str, users, items, vectors, expires=T0 + 2 * HOUR, run="r") -> None:
    store.write_pair_embeddings(
        run, version, np.asarray(users), np.asarray(items), vectors, np.ones(len(users)), T0, expires
    )


def test_ttl_boundary_visible_before_expiry_invisible_at_it(store: FeatureStore, version: str) -> None:
    expires = T0 + 2 * HOUR
    put_pairs(store, version, [1, 2], [10, 10], vecs(2), expires=expires)
    store.write_user_aggregates("r", version, np.array([1]), vecs(1), np.array([4]), 24, T0, expires)
    store.write_user_neighbours("r", version, np.array([1]), np.array([[2]]), np.array([[0.9]]), T0, expires)
    just_before = store.read_tiers(version, 1, np.array([10]), expires - HOUR / 3_600_000_000)
    assert (just_before.pair_mask[0], just_before.user_agg_present, just_before.knn_mask[0]) == (True, True, True)
    at_expiry = store.read_tiers(version, 1, np.array([10]), expires)
    assert (at_expiry.pair_mask[0], at_expiry.user_agg_present, at_expiry.knn_mask[0]) == (False, False, False)
    assert not at_expiry.pair.any() and not at_expiry.user_agg.any() and not at_expiry.knn.any()
    assert store.fresh_pairs(version, np.array([1]), np.array([10]), expires).tolist() == [False]


def test_versions_are_isolated(store: FeatureStore, version: str) -> None:
    other = store.register_embedding_version("4", "2", DIM, created_at=T0)
    put_pairs(store, version, [1, 2], [10, 10], vecs(2, seed=1))
    put_pairs(store, other, [1], [11], vecs(1, seed=2))
    store.write_user_aggregates("r", other, np.array([1]), vecs(1), np.array([1]), 24, T0, T0 + HOUR)
    store.write_user_neighbours("r", other, np.array([1]), np.array([[2]]), np.array([[1.0]]), T0, T0 + HOUR)
    got = store.read_tiers(version, 1, np.array([10, 11]), T0)
    assert got.pair_mask.tolist() == [True, False]
    assert not got.user_agg_present and not got.knn_mask.any()
    assert store.read_tiers(other, 1, np.array([10, 11]), T0).pair_mask.tolist() == [False, True]


def test_unknown_version_is_refused_on_read(store: FeatureStore) -> None:
    with pytest.raises(StoreError, match="unknown embedding version 'fm1-ae1-d8'"):
        store.read_tiers("fm1-ae1-d8", 1, np.array([1]), T0)


def test_pair_tier_returns_each_candidates_vector_in_request_order(store: FeatureStore, version: str) -> None:
    vectors = vecs(3, seed=3)
    put_pairs(store, version, [1, 1, 1], [30, 10, 20], vectors)
    got = store.read_tiers(version, 1, np.array([20, 99, 30, 20]), T0)
    assert got.pair.dtype == np.float32 and got.pair.shape == (4, DIM)
    assert got.pair_mask.tolist() == [True, False, True, True]
    np.testing.assert_array_equal(got.pair[[0, 2, 3]], vectors[[2, 0, 2]])
    assert not got.pair[1].any()


def test_knn_tier_is_the_similarity_weighted_mean_of_fresh_positive_neighbours(
    store: FeatureStore, version: str
) -> None:
    # User 1's neighbours: 2 (0.75), 3 (0.25), 4 (0.5, but its pair has expired), 5 (-0.4: never used).
    store.write_user_neighbours(
        "r", version, np.array([1]), np.array([[2, 3, 4, 5]]), np.array([[0.75, 0.25, 0.5, -0.4]]), T0, T0 + 5 * HOUR
    )
    v = vecs(6, seed=4)
    put_pairs(store, version, [2, 3, 5, 2], [10, 10, 10, 11], v[:4])
    put_pairs(store, version, [4, 4], [10, 12], v[4:], expires=T0 + HOUR)
    got = store.read_tiers(version, 1, np.array([10, 11, 12, 13]), T0 + HOUR)
    assert got.knn_mask.tolist() == [True, True, False, False]
    np.testing.assert_allclose(got.knn[0], (0.75 * v[0] + 0.25 * v[1]) / 1.0, rtol=1e-6)
    np.testing.assert_allclose(got.knn[1], v[3], rtol=1e-6)
    assert not got.knn[2:].any()
    assert not got.pair_mask.any()  # user 1 has no pair of its own


def test_knn_ignores_expired_neighbour_lists(store: FeatureStore, version: str) -> None:
    store.write_user_neighbours("r", version, np.array([1]), np.array([[2]]), np.array([[1.0]]), T0, T0 + HOUR)
    put_pairs(store, version, [2], [10], vecs(1), expires=T0 + 5 * HOUR)
    assert store.read_tiers(version, 1, np.array([10]), T0 + HOUR).knn_mask.tolist() == [False]


def test_user_aggregate_tier(store: FeatureStore, version: str) -> None:
    store.write_user_aggregates("r", version, np.array([1, 2]), vecs(2, seed=5), np.array([3, 4]), 24, T0, T0 + HOUR)
    got = store.read_tiers(version, 2, np.array([10, 11]), T0)
    assert got.user_agg_present and got.user_agg.shape == (DIM,)
    np.testing.assert_array_equal(got.user_agg, vecs(2, seed=5)[1])
    absent = store.read_tiers(version, 3, np.array([10]), T0)
    assert not absent.user_agg_present and not absent.user_agg.any()


def test_batch_read_matches_per_user_reads(store: FeatureStore, version: str) -> None:
    rng = np.random.default_rng(6)
    users, items = rng.integers(0, 6, 60), rng.integers(0, 8, 60)
    keys = np.unique(np.stack([users, items], 1), axis=0)
    put_pairs(store, version, keys[:, 0], keys[:, 1], vecs(len(keys), seed=7))
    store.write_user_aggregates("r", version, np.arange(3), vecs(3, seed=8), np.ones(3, int), 24, T0, T0 + HOUR)
    store.write_user_neighbours(
        "r", version, np.arange(6), (np.arange(6)[:, None] + [1, 2]) % 6, rng.uniform(0.1, 1, (6, 2)), T0, T0 + HOUR
    )
    store.write_item_neighbours(
        "r", version, np.arange(8), (np.arange(8)[:, None] + [1, 3]) % 8, rng.uniform(0.1, 1, (8, 2)), T0, T0 + HOUR
    )
    req_users, req_items = rng.integers(0, 7, 40), rng.integers(0, 9, 40)
    batch = store.read_tiers_batch(version, req_users, req_items, T0)
    for user in np.unique(req_users):
        rows = np.flatnonzero(req_users == user)
        one = store.read_tiers(version, int(user), req_items[rows], T0)
        np.testing.assert_array_equal(batch.pair[rows], one.pair)
        np.testing.assert_array_equal(batch.pair_mask[rows], one.pair_mask)
        np.testing.assert_array_equal(batch.knn[rows], one.knn)
        np.testing.assert_array_equal(batch.knn_mask[rows], one.knn_mask)
        np.testing.assert_array_equal(batch.a2a[rows], one.a2a)
        np.testing.assert_array_equal(batch.a2a_mask[rows], one.a2a_mask)
        assert (batch.user_agg_mask[rows] == one.user_agg_present).all()
        np.testing.assert_array_equal(batch.user_agg[rows], np.broadcast_to(one.user_agg, (len(rows), DIM)))
    assert batch.pair_mask.any() and batch.knn_mask.any() and batch.user_agg_mask.any() and batch.a2a_mask.any()


def test_fresh_pairs_marks_only_fresh_rows_of_the_version(store: FeatureStore, version: str) -> None:
    put_pairs(store, version, [1, 1], [10, 11], vecs(2), expires=T0 + HOUR)
    put_pairs(store, version, [2], [10], vecs(1), expires=T0 + 3 * HOUR)
    mask = store.fresh_pairs(version, np.array([1, 1, 2, 2, 1]), np.array([10, 11, 10, 11, 10]), T0 + HOUR)
    assert mask.tolist() == [False, False, True, False, False]
    assert store.fresh_pairs(version, np.array([], dtype=np.int64), np.array([], dtype=np.int64), T0).shape == (0,)


def test_empty_candidate_list(store: FeatureStore, version: str) -> None:
    got = store.read_tiers(version, 1, np.array([], dtype=np.int64), T0)
    assert got.pair.shape == (0, DIM) and got.knn.shape == (0, DIM) and got.user_agg.shape == (DIM,)
    assert got.a2a.shape == (0, DIM) and got.a2a_mask.shape == (0,)
