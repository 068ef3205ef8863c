"""The neighbour tier covers users with no code of their own: an active user (a request or a sign-up in the
KNN lookback) with no pair code in the aggregate window gets a neighbour row from the hourly run, and the
ranker's batched read serves it a neighbour value, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from precompute_env import run_succeeded_hour, store_rows

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.store import FeatureStore, open_store

PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu"}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history
READ_AT = HOUR + timedelta(minutes=30)  # the store is read half way through the hour the run served


def _user_ids(store: FeatureStore, sql: str) -> set[int]:
    return {int(row[0]) for row in store_rows(store, sql)}


def _never_requested(log: EventLog, before: datetime) -> set[int]:
    """Users who signed up before ``before`` and made no request before it."""
    users = log.users().to_pandas()
    signed = set(users.loc[users["signup_ts"] < before, "user_id"].astype(int))
    requested = set(log.requests(log.start, before, columns=["user_id"])["user_id"].to_numpy().astype(int))
    return signed - requested


def test_an_active_user_without_an_aggregate_is_served_by_its_neighbours(run_settings: Settings) -> None:
    log = EventLog(run_settings.world_dir())
    done, record = run_succeeded_hour(run_settings, HOUR, PARAMS)
    with open_store(run_settings.store_url) as store:
        with_row = _user_ids(store, "SELECT DISTINCT user_id FROM user_neighbours")
        cold = np.array(sorted(with_row - _user_ids(store, "SELECT user_id FROM user_aggregates")), np.int64)
        lenders = _user_ids(store, "SELECT DISTINCT neighbour_id FROM user_neighbours")
        with_pairs = _user_ids(store, "SELECT DISTINCT user_id FROM pair_embeddings")
        items = np.arange(log.items().num_rows, dtype=np.int64)
        users = np.repeat(cold, len(items))
        read = store.read_tiers_batch(record.embedding_version, users, np.tile(items, len(cold)), READ_AT)

    # New users who have not requested yet are the bulk of the rows no other tier covers.
    assert set(cold) & _never_requested(log, HOUR)
    assert lenders <= with_pairs, "a neighbour without pair codes can lend none"
    assert not read.pair_mask.any() and not read.user_agg_mask.any()
    covered = np.unique(users[read.knn_mask])
    np.testing.assert_array_equal(covered, cold)  # every such user gets a neighbour value for some item
    assert done["counts"]["knn_users"] > done["counts"]["aggregates_written"]
