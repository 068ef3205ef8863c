"""The exposure counters: one packed row per user, read with the tiers point-in-time, replaced whole, expired."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0, count_rows, vecs

from solaris import exposure
from solaris.store import FeatureStore, StoreError
from solaris.store.codec import decode_exposure, encode_exposure
from solaris.store.records import ExposureCounts

W = len(exposure.WINDOWS_H)
US = HOUR / 3_600_000_000
EXPIRES = T0 + 2 * HOUR


def counts(users, user_counts, pairs=()) -> ExposureCounts:
    """``pairs``: (user, item, counts) triples."""
    pair_users, pair_items, pair_counts = zip(*pairs, strict=True) if pairs else ((), (), ())
    return ExposureCounts(
        np.array(users, np.int64),
        np.array(user_counts, np.int64).reshape(-1, W),
        np.array(pair_users, np.int64),
        np.array(pair_items, np.int64),
        np.array(pair_counts, np.int64).reshape(-1, W),
    )


# User 1 was shown items 10 and 20, user 2 item 10, user 3 nothing in the windows (it still has a row).
# The pairs come unordered: the store sorts them.
WORKED = counts(
    [1, 3, 2],
    [[2, 5, 9], [1, 1, 1], [0, 0, 7]],
    [(1, 20, [0, 1, 4]), (2, 10, [0, 0, 2]), (1, 10, [1, 2, 3])],
)


def exposure_at(store: FeatureStore, version: str, users, items, t=T0 + HOUR) -> list[list[float]]:
    read = store.read_tiers_batch(version, np.array(users), np.array(items), t)
    assert read.exposure.dtype == np.float32 and read.exposure.shape == (len(users), 2 * W)
    return read.exposure.tolist()


def test_the_packed_row_is_user_counts_then_item_ids_then_pair_counts() -> None:
    pair_counts = [[1, 2, 3], [0, 1, 4]]
    [packed] = encode_exposure(np.array([[2, 5, 9]]), np.array([2]), np.array([10, 20]), np.array(pair_counts))
    assert np.frombuffer(packed, "<i4").tolist() == [2, 5, 9, 10, 20, 1, 2, 3, 0, 1, 4]
    # Then a user with no pairs: its counts alone.
    users, items, pairs = decode_exposure(packed + packed[: 4 * W], np.array([2, 0]))
    assert (users.tolist(), items.tolist(), pairs.tolist()) == ([[2, 5, 9], [2, 5, 9]], [10, 20], pair_counts)


def test_a_users_counts_come_back_with_each_requested_items_pair_counts(store: FeatureStore, version: str) -> None:
    assert store.write_exposure_counts("r", WORKED, T0, EXPIRES) == 3
    assert count_rows(store, "exposure_counts") == 3
    assert exposure_at(store, version, [1, 1, 1, 1], [10, 30, 20, 10]) == [
        [2, 5, 9, 1, 2, 3],
        [2, 5, 9, 0, 0, 0],
        [2, 5, 9, 0, 1, 4],
        [2, 5, 9, 1, 2, 3],
    ]
    # Two users and a repeated item in one request; user 4 has no row.
    assert exposure_at(store, version, [2, 1, 2, 4, 3, 2], [10, 20, 20, 10, 10, 10]) == [
        [0, 0, 7, 0, 0, 2],
        [2, 5, 9, 0, 1, 4],
        [0, 0, 7, 0, 0, 0],
        [0] * 6,
        [1, 1, 1, 0, 0, 0],
        [0, 0, 7, 0, 0, 2],
    ]
    assert store.read_tiers(version, 1, np.array([20]), T0).exposure.tolist() == [[2, 5, 9, 0, 1, 4]]


def test_counters_belong_to_no_version_and_leave_the_other_tiers_as_they_were(
    store: FeatureStore, version: str
) -> None:
    other = store.register_embedding_version("4", "2", DIM, created_at=T0)
    store.write_exposure_counts("r", WORKED, T0, EXPIRES)
    v = vecs(3, seed=5)
    store.write_pair_embeddings("r", version, np.array([1, 1, 1]), np.array([10, 20, 40]), v, np.ones(3), T0, EXPIRES)
    store.write_item_neighbours("r", version, np.array([30]), np.array([[40, 10]]), np.array([[1.0, 0.0]]), T0, EXPIRES)
    store.write_user_aggregates("r", version, np.array([1]), v[:1], np.array([3]), 24, T0, EXPIRES)
    read = store.read_tiers_batch(version, np.array([1, 1, 1]), np.array([20, 30, 10]), T0 + HOUR)
    np.testing.assert_array_equal(read.pair[[0, 2]], v[[1, 0]])
    assert read.pair_mask.tolist() == [True, False, True] and read.a2a_mask.tolist() == [False, True, False]
    np.testing.assert_array_equal(read.a2a[1], v[2])
    assert read.user_agg_mask.all()
    assert read.exposure.tolist() == [[2, 5, 9, 0, 1, 4], [2, 5, 9, 0, 0, 0], [2, 5, 9, 1, 2, 3]]
    assert exposure_at(store, other, [1], [10]) == [[2, 5, 9, 1, 2, 3]]


def test_a_user_without_a_row_reads_zeros(store: FeatureStore, version: str) -> None:
    assert exposure_at(store, version, [1, 2], [10, 10]) == [[0] * 6] * 2
    store.write_exposure_counts("r", WORKED, T0, EXPIRES)
    assert exposure_at(store, version, [5], [10]) == [[0] * 6]


def test_counters_are_read_point_in_time(store: FeatureStore, version: str) -> None:
    store.write_exposure_counts("r", WORKED, T0, EXPIRES)
    seen = [2, 5, 9, 1, 2, 3]
    for t, expected in ((T0 - US, [0] * 6), (T0, seen), (EXPIRES - US, seen), (EXPIRES, [0] * 6)):
        assert exposure_at(store, version, [1], [10], t) == [expected], t


def test_a_second_write_replaces_the_users_row_whole(store: FeatureStore, version: str) -> None:
    store.write_exposure_counts("r", WORKED, T0, EXPIRES)
    later = T0 + HOUR
    replacing = counts([1], [[3, 6, 10]], [(1, 20, [1, 2, 5])])  # item 10 is no longer listed
    assert store.write_exposure_counts("r2", replacing, later, later + 2 * HOUR) == 1
    assert count_rows(store, "exposure_counts") == 3
    assert exposure_at(store, version, [1, 1, 2], [10, 20, 10], later) == [
        [3, 6, 10, 0, 0, 0],
        [3, 6, 10, 1, 2, 5],
        [0, 0, 7, 0, 0, 2],
    ]
    # History is not kept: before the new row's created_at, user 1 has nothing (user 2 its old row).
    assert exposure_at(store, version, [1, 2], [10, 10], later - US) == [[0] * 6, [0, 0, 7, 0, 0, 2]]
    # The replacing row's expiry holds, not the replaced one's.
    assert exposure_at(store, version, [1], [20], EXPIRES) == [[3, 6, 10, 1, 2, 5]]


def test_the_largest_ids_and_counts_that_fit_round_trip(store: FeatureStore, version: str) -> None:
    top = 2**31 - 1
    store.write_exposure_counts("r", counts([1], [[top, 0, top]], [(1, top, [top, 1, 0])]), T0, EXPIRES)
    expected = np.array([[top, 0, top, top, 1, 0]], np.float32)  # the read's float32 rounds 2^31 - 1 up
    assert exposure_at(store, version, [1], [top]) == expected.tolist()


def widths(user_width: int, pair_width: int) -> ExposureCounts:
    """User 1 and its pair (1, 10) with counts of these widths."""
    return ExposureCounts(
        np.array([1]), np.ones((1, user_width), int), np.array([1]), np.array([10]), np.ones((1, pair_width), int)
    )


@pytest.mark.parametrize(
    ("batch", "message"),
    [
        (counts([1, 1], [[1, 1, 1], [2, 2, 2]]), r"user_id \[1\] appears twice"),
        (counts([1], [[1, 1, 1]], [(2, 10, [1, 1, 1])]), "pair_user_ids row 0 is user 2, which user_ids does not"),
        (counts([1], [[1, 1, 1]], [(1, 10, [1, 1, 1]), (1, 10, [2, 2, 2])]), r"\(user_id, item_id\) \[1, 10\] appears"),
        (counts([1, 2], [[1, 1, 1], [1, -1, 1]]), "user_counts row 1 holds a negative count"),
        (counts([1], [[1, 1, 1]], [(1, 10, [0, 0, -3])]), "pair_counts row 0 holds a negative count"),
        (widths(W - 1, W), r"user_counts has shape \(1, 2\), expected \(1, 3\)"),
        (widths(W, W + 1), r"pair_counts has shape \(1, 4\), expected \(1, 3\)"),
        (replace(widths(W, W), user_counts=np.ones((1, W))), "user_counts must hold integer counts"),
        (counts([1], [[1, 1, 1]], [(1, 2**31, [1, 1, 1])]), "does not fit"),
        (counts([1], [[1, 2**31, 1]]), "does not fit"),
        (counts([1], [[1, 1, 1]], [(1, -10, [1, 1, 1])]), "pair_item_ids row 0 is negative"),
    ],
)
def test_a_batch_breaking_a_rule_is_refused_whole(
    store: FeatureStore, version: str, batch: ExposureCounts, message: str
) -> None:
    store.write_exposure_counts("r", WORKED, T0, EXPIRES)
    with pytest.raises(StoreError, match=message):
        store.write_exposure_counts("r2", batch, T0 + HOUR, EXPIRES + HOUR)
    assert count_rows(store, "exposure_counts") == 3
    assert exposure_at(store, version, [1], [10]) == [[2, 5, 9, 1, 2, 3]]


def test_a_run_id_and_an_expiry_after_the_creation_are_required(store: FeatureStore) -> None:
    with pytest.raises(StoreError, match="is not after"):
        store.write_exposure_counts("r", WORKED, T0, T0)
    with pytest.raises(StoreError, match="run_id must be a non-empty string"):
        store.write_exposure_counts("", WORKED, T0, EXPIRES)
    assert count_rows(store, "exposure_counts") == 0
    assert store.write_exposure_counts("r", counts([], []), T0, EXPIRES) == 0


def test_expire_deletes_the_expired_rows_and_counts_them(store: FeatureStore, version: str) -> None:
    store.write_exposure_counts("r", counts([1, 2], [[1, 1, 1], [2, 2, 2]], [(1, 10, [1, 0, 0])]), T0, T0 + HOUR)
    store.write_exposure_counts("r", counts([3], [[3, 3, 3]]), T0, EXPIRES)
    stats = store.stats(version, T0)["exposure_counts"]
    assert (stats.rows, stats.fresh, stats.expiring_within_hour) == (3, 3, 2)
    assert store.expire(T0 + HOUR - US)["exposure_counts"] == 0
    assert store.expire(T0 + HOUR, batch_size=1)["exposure_counts"] == 2
    assert count_rows(store, "exposure_counts") == 1
    assert exposure_at(store, version, [3], [10], T0) == [[3, 3, 3, 0, 0, 0]]
    assert store.expire(EXPIRES)["exposure_counts"] == 1
    assert count_rows(store, "exposure_counts") == 0
