"""Reads are point-in-time: a read at ``t`` sees a row only when ``created_at <= t < expires_at``, so a
backfill or a replay of an earlier hour never sees rows written for a later one (issue #17, item 6)."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import HOUR, T0, vecs

from solaris.store import FeatureStore
from solaris.store.records import ExposureCounts

H = T0  # the hour a backfill re-runs; rows below are written for hour H+2
US = HOUR / 3_600_000_000  # one microsecond, the store's resolution


def write_future_rows(store: FeatureStore, version: str) -> np.ndarray:
    """User 1: pair (1, 10), an aggregate, neighbour 2, whose pair (2, 10) feeds its knn tier, and exposure
    counters; all created at H+2 and expiring at H+5."""
    v = vecs(3, seed=11)
    created, expires = H + 2 * HOUR, H + 5 * HOUR
    users, items = np.array([1, 2]), np.array([10, 10])
    store.write_pair_embeddings("h2", version, users, items, v[:2], np.ones(2), created, expires)
    store.write_user_aggregates("h2", version, np.array([1]), v[2:], np.array([3]), 24, created, expires)
    store.write_user_neighbours("h2", version, np.array([1]), np.array([[2]]), np.array([[0.8]]), created, expires)
    shown = ExposureCounts(np.array([1]), np.ones((1, 3), int), np.array([1]), np.array([10]), np.ones((1, 3), int))
    store.write_exposure_counts("h2", shown, created, expires)
    return v


def tiers(store: FeatureStore, version: str, t) -> tuple[bool, bool, bool]:
    got = store.read_tiers(version, 1, np.array([10]), t)
    return bool(got.pair_mask[0]), bool(got.user_agg_present), bool(got.knn_mask[0])


def test_a_row_created_later_is_invisible_to_an_earlier_read(store: FeatureStore, version: str) -> None:
    v = write_future_rows(store, version)
    for before in (H, H + HOUR, H + 2 * HOUR - US):
        assert tiers(store, version, before) == (False, False, False), before
        got = store.read_tiers(version, 1, np.array([10]), before)
        assert not got.pair.any() and not got.user_agg.any() and not got.knn.any() and not got.exposure.any()
    for during in (H + 2 * HOUR, H + 3 * HOUR, H + 5 * HOUR - US):
        assert tiers(store, version, during) == (True, True, True), during
    got = store.read_tiers(version, 1, np.array([10]), H + 2 * HOUR)
    np.testing.assert_array_equal(got.pair[0], v[0])
    np.testing.assert_array_equal(got.user_agg, v[2])
    np.testing.assert_allclose(got.knn[0], v[1], rtol=1e-6)
    assert got.exposure.tolist() == [[1] * 6]
    assert tiers(store, version, H + 5 * HOUR) == (False, False, False)


def test_batch_read_is_point_in_time(store: FeatureStore, version: str) -> None:
    write_future_rows(store, version)
    users, items = np.array([1, 1, 2]), np.array([10, 11, 10])
    early = store.read_tiers_batch(version, users, items, H + HOUR)
    assert not early.pair_mask.any() and not early.user_agg_mask.any() and not early.knn_mask.any()
    late = store.read_tiers_batch(version, users, items, H + 2 * HOUR)
    assert late.pair_mask.tolist() == [True, False, True]
    assert late.user_agg_mask.tolist() == [True, True, False]
    assert late.knn_mask.tolist() == [True, False, False]


def test_knn_needs_both_the_list_and_the_neighbours_pair_created_by_t(store: FeatureStore, version: str) -> None:
    """User 1's list is old but its neighbour's pair is from H+2; user 3's list is from H+2, its
    neighbour's pair old. At H+1 neither has a knn vector, at H+2 both do."""
    v, expires = vecs(2, seed=12), H + 5 * HOUR
    store.write_user_neighbours("h0", version, np.array([1]), np.array([[2]]), np.array([[0.5]]), H, expires)
    store.write_pair_embeddings("h2", version, np.array([2]), np.array([10]), v[:1], np.ones(1), H + 2 * HOUR, expires)
    store.write_user_neighbours("h2", version, np.array([3]), np.array([[4]]), np.array([[0.5]]), H + 2 * HOUR, expires)
    store.write_pair_embeddings("h0", version, np.array([4]), np.array([10]), v[1:], np.ones(1), H, expires)
    users, items = np.array([1, 3]), np.array([10, 10])
    assert store.read_tiers_batch(version, users, items, H + HOUR).knn_mask.tolist() == [False, False]
    assert store.read_tiers_batch(version, users, items, H + 2 * HOUR).knn_mask.tolist() == [True, True]


def test_fresh_pairs_counts_only_rows_created_by_t(store: FeatureStore, version: str) -> None:
    write_future_rows(store, version)
    store.write_pair_embeddings("h0", version, np.array([1]), np.array([11]), vecs(1), np.ones(1), H, H + 5 * HOUR)
    users, items = np.array([1, 2, 1]), np.array([10, 10, 11])
    assert store.fresh_pairs(version, users, items, H + HOUR).tolist() == [False, False, True]
    assert store.fresh_pairs(version, users, items, H + 2 * HOUR - US).tolist() == [False, False, True]
    assert store.fresh_pairs(version, users, items, H + 2 * HOUR).tolist() == [True, True, True]
    assert store.fresh_pairs(version, users, items, H + 5 * HOUR).tolist() == [False, False, False]


def test_stats_count_as_fresh_only_rows_created_by_t(store: FeatureStore, version: str) -> None:
    write_future_rows(store, version)
    early = store.stats(version, H + HOUR)
    assert {name: (s.rows, s.fresh, s.expiring_within_hour) for name, s in early.items()} == {
        "pair_embeddings": (2, 0, 0),
        "user_aggregates": (1, 0, 0),
        "user_neighbours": (1, 0, 0),
        "item_neighbours": (0, 0, 0),
        "exposure_counts": (1, 0, 0),
    }
    late = store.stats(version, H + 4.5 * HOUR)
    assert {name: (s.fresh, s.expiring_within_hour) for name, s in late.items()} == {
        "pair_embeddings": (2, 2),
        "user_aggregates": (1, 1),
        "user_neighbours": (1, 1),
        "item_neighbours": (0, 0),
        "exposure_counts": (1, 1),
    }


def test_an_upsert_keeps_one_row_per_key_so_an_earlier_read_loses_the_replaced_row(
    store: FeatureStore, version: str
) -> None:
    """The documented limitation: the tables keep one row per key, and a newer write replaces the older
    row. A read at a time before the newer row's created_at finds nothing, though the older row was valid
    then; it never sees the newer row's values."""
    old, new = vecs(2, seed=13)
    store.write_pair_embeddings("h0", version, np.array([1]), np.array([10]), old[None], np.ones(1), H, H + 4 * HOUR)
    assert tiers(store, version, H + HOUR)[0]
    store.write_pair_embeddings(
        "h2", version, np.array([1]), np.array([10]), new[None], np.ones(1), H + 2 * HOUR, H + 6 * HOUR
    )
    assert store.read_tiers(version, 1, np.array([10]), H + HOUR).pair_mask.tolist() == [False]
    np.testing.assert_array_equal(store.read_tiers(version, 1, np.array([10]), H + 2 * HOUR).pair[0], new)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_postgres_serving_reads_still_prune_and_join_by_hash_with_the_created_at_test(
    store: FeatureStore, version: str
) -> None:
    """created_at <= t is a filter on the rows the scans fetch anyway: the partitions are still pruned by
    expires_at and the plan keeps its hash joins (see test_store_readers)."""
    from solaris.store.codec import MICROS_PER_HOUR, to_micros
    from solaris.store.sqlfiles import load_sql

    for hour in (1, 2, 3):
        store.write_pair_embeddings(
            "r", version, np.arange(4), np.arange(4) + 10 * hour, vecs(4), np.ones(4), H, H + hour * HOUR
        )
    partition = [f"pair_embeddings_h{to_micros(H + k * HOUR, 't') // MICROS_PER_HOUR}" for k in (1, 2, 3)]
    params = {"version": version, "t": to_micros(H + 2 * HOUR, "t"), "users": np.array([1]), "items": np.arange(40)}
    with store._readers.connection() as conn:  # type: ignore[attr-defined]
        for name in ("read_tiers", "fresh_pairs"):
            plan = "\n".join(r[0] for r in conn.execute("EXPLAIN " + load_sql("postgresql", name), params))
            assert "created_at <=" in plan and "Hash" in plan and "Nested Loop" not in plan, plan
            assert partition[0] not in plan and partition[1] in plan and partition[2] in plan, plan
