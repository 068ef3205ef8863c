"""``stats`` and ``expire`` at the TTL boundary: a row is fresh at t only while ``t < expires_at``, so a row expiring exactly
at t is no longer fresh (as ``read_tiers`` and ``expire`` see it) and one expiring a microsecond later still is.
Runs on both backends; each dialect has its own stats.sql.
"""

from __future__ import annotations

from datetime import datetime

import numpy as np
from store_helpers import HOUR, T0, vecs

from solaris.store import FeatureStore
from solaris.store.records import ExposureCounts

US = HOUR / 3_600_000_000
T = T0 + 3 * HOUR
# Each table gets the same two rows, so each table's figures are the same.
TABLES = ("pair_embeddings", "user_aggregates", "user_neighbours", "item_neighbours", "exposure_counts")


def write_at_boundary(store: FeatureStore, version: str, at: datetime = T) -> None:
    """In each table, user (or item) 1's row expires exactly at ``at`` and user 2's row at ``at`` + 1 µs; both
    created an hour before."""
    created = at - HOUR
    for user, expires in ((1, at), (2, at + US)):
        users = np.array([user])
        store.write_pair_embeddings(
            "r", version, users, np.array([10]), vecs(1, seed=user), np.ones(1), created, expires
        )
        store.write_user_aggregates("r", version, users, vecs(1, seed=user), np.array([3]), 24, created, expires)
        store.write_user_neighbours("r", version, users, np.array([[5]]), np.array([[0.5]]), created, expires)
        store.write_item_neighbours("r", version, users, np.array([[5]]), np.array([[0.5]]), created, expires)
        none = np.zeros(0, np.int64)
        counts = ExposureCounts(users, np.ones((1, 3), np.int64), none, none, np.zeros((0, 3), np.int64))
        store.write_exposure_counts("r", counts, created, expires)


def test_a_row_expiring_at_t_is_not_counted_fresh_at_t(store: FeatureStore, version: str) -> None:
    write_at_boundary(store, version)
    at_t = store.stats(version, T)
    figures = {name: (s.rows, s.fresh, s.expiring_within_hour) for name, s in at_t.items()}
    assert figures == dict.fromkeys(TABLES, (2, 1, 1)), figures
    assert at_t["pair_embeddings"].fresh_share == 0.5


def test_both_rows_are_fresh_a_microsecond_before_and_none_a_microsecond_after(
    store: FeatureStore, version: str
) -> None:
    write_at_boundary(store, version)
    before = {name: (s.fresh, s.expiring_within_hour) for name, s in store.stats(version, T - US).items()}
    assert before == dict.fromkeys(TABLES, (2, 2)), before
    after = {name: (s.rows, s.fresh, s.expiring_within_hour) for name, s in store.stats(version, T + US).items()}
    assert after == dict.fromkeys(TABLES, (2, 0, 0)), after


def test_stats_agree_with_what_a_read_at_t_sees(store: FeatureStore, version: str) -> None:
    write_at_boundary(store, version)
    read = store.read_tiers_batch(version, np.array([1, 2]), np.array([10, 10]), T)
    assert read.pair_mask.tolist() == [False, True]
    assert store.stats(version, T)["pair_embeddings"].fresh == int(read.pair_mask.sum())


def test_expire_at_t_deletes_the_row_expiring_at_t_and_keeps_the_one_fresh_a_microsecond_longer(
    store: FeatureStore, version: str
) -> None:
    """In every table, and on PostgreSQL across its expiry-hour partitions: the kept row expires in the last
    microsecond of its partition's hour, so a partition dropped a microsecond early loses it."""
    at = T + HOUR - 2 * US
    write_at_boundary(store, version, at)

    store.expire(at)

    after = store.stats(version, at)
    kept = {name: (s.rows, s.fresh) for name, s in after.items()}
    assert kept == dict.fromkeys(TABLES, (1, 1)), kept  # the one row left is the one still fresh at ``at``
