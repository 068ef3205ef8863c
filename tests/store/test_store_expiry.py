"""Expiry as of t deletes exactly the rows with expires_at <= t, in bounded batches; stats see the same."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import HOUR, T0, count_rows, vecs

from solaris.store import FeatureStore, StoreError


def fill(store: FeatureStore, version: str) -> None:
    """Pairs expiring at T0+1h (5 rows), T0+2h (7) and T0+2h30 (4); aggregates and user lists at T0+2h;
    item lists at T0+1h (3 rows) and T0+2h30 (2)."""
    for n, expires, first_user in ((5, T0 + HOUR, 0), (7, T0 + 2 * HOUR, 100), (4, T0 + 2.5 * HOUR, 200)):
        users = np.arange(first_user, first_user + n)
        store.write_pair_embeddings("r", version, users, users % 3, vecs(n), np.ones(n), T0, expires)
    store.write_user_aggregates("r", version, np.arange(3), vecs(3), np.ones(3, int), 24, T0, T0 + 2 * HOUR)
    store.write_user_neighbours(
        "r", version, np.arange(2), np.array([[5, 6], [7, -1]]), np.ones((2, 2)), T0, T0 + 2 * HOUR
    )
    item_lists = np.array([[1, 2], [0, -1]])
    store.write_item_neighbours("r", version, np.array([0, 1]), item_lists, np.ones((2, 2)), T0, T0 + HOUR)
    store.write_item_neighbours("r", version, np.array([2]), np.array([[0, 1]]), np.ones((1, 2)), T0, T0 + 2.5 * HOUR)


def test_expire_deletes_exactly_the_expired_rows_in_batches(store: FeatureStore, version: str) -> None:
    fill(store, version)
    first = store.expire(T0 + HOUR, batch_size=2)
    # The T0+1h rows sit in the partition [T0+1h, T0+2h), not wholly expired at T0+1h: deleted row by row.
    assert first == {
        "pair_embeddings": 5,
        "user_aggregates": 0,
        "user_neighbours": 0,
        "item_neighbours": 2,
        "exposure_counts": 0,
        "pair_partitions_dropped": 0,
    }
    assert count_rows(store, "pair_embeddings") == 11
    assert count_rows(store, "item_neighbours") == 1  # one row per item list
    assert count_rows(store, "user_aggregates") == 3
    store.expire(T0 + 2 * HOUR, batch_size=3)
    assert count_rows(store, "pair_embeddings") == 4
    assert (count_rows(store, "user_aggregates"), count_rows(store, "user_neighbours")) == (0, 0)
    assert count_rows(store, "item_neighbours") == 1
    assert store.read_tiers(version, 200, np.array([200 % 3]), T0 + 2 * HOUR).pair_mask.tolist() == [True]
    assert store.expire(T0 + 2 * HOUR)["pair_embeddings"] == 0
    assert store.expire(T0 + 2.5 * HOUR, batch_size=1)["item_neighbours"] == 1
    assert count_rows(store, "item_neighbours") == 0


def test_expire_refuses_a_bad_batch_size(store: FeatureStore) -> None:
    with pytest.raises(StoreError, match="batch_size=0"):
        store.expire(T0, batch_size=0)


def test_stats_count_rows_freshness_and_rows_expiring_within_the_hour(store: FeatureStore, version: str) -> None:
    fill(store, version)
    stats = store.stats(version, T0 + 1.5 * HOUR)
    pairs = stats["pair_embeddings"]
    assert (pairs.rows, pairs.fresh, pairs.expiring_within_hour) == (16, 11, 7 + 4)
    assert pairs.fresh_share == pytest.approx(11 / 16)
    assert pairs.oldest_created_at == pairs.newest_created_at == T0
    assert (stats["user_aggregates"].rows, stats["user_neighbours"].rows) == (3, 3)
    items = stats["item_neighbours"]
    assert (items.rows, items.fresh, items.expiring_within_hour) == (3, 1, 1)
    empty = store.stats("fm0-ae0-d1", T0)["pair_embeddings"]
    assert (empty.rows, empty.fresh_share, empty.oldest_created_at) == (0, 0.0, None)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_postgres_expiry_drops_whole_hour_partitions(store: FeatureStore, version: str) -> None:
    fill(store, version)
    assert partitions(store) == 2  # expiry hours T0+1h and T0+2h (T0+2h30 shares the latter)
    counts = store.expire(T0 + 2 * HOUR - HOUR / 3_600_000_000)
    assert (counts["pair_partitions_dropped"], counts["pair_embeddings"]) == (1, 0)
    assert partitions(store) == 1
    assert count_rows(store, "pair_embeddings") == 11


def partitions(store: FeatureStore) -> int:
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        return int(
            conn.exec_driver_sql(
                "SELECT count(*) FROM pg_inherits WHERE inhparent = 'pair_embeddings'::regclass"
            ).scalar_one()
        )
