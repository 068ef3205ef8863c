"""The A2A (ad-to-ad) tier: for pair (u, i), the similarity-weighted mean of u's own fresh pair codes over i's
fresh item neighbours; and the item-list writes it reads."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0, StoreFactory, count_rows, vecs

from solaris.store import FeatureStore, StoreError
from solaris.store.codec import decode_lists

H = T0
TOL = dict(rtol=1e-3, atol=1e-3)  # similarities are stored as float32, vectors as float16


def put_pair(store: FeatureStore, version: str, user: int, item: int, vector, created=H, expires=H + 5 * HOUR) -> None:
    store.write_pair_embeddings(
        "r", version, np.array([user]), np.array([item]), vector[None], np.ones(1), created, expires
    )


def put_list(store: FeatureStore, version: str, item: int, neighbours, sims, created=H, expires=H + 5 * HOUR) -> int:
    return store.write_item_neighbours(
        "r", version, np.array([item]), np.array([neighbours]), np.array([sims]), created, expires
    )


def test_worked_example(store: FeatureStore, version: str) -> None:
    """User 1 has codes for items 20 (v1) and 21 (v2). Item 10's neighbours: 20 (0.8), 21 (0.2), 22 (0.5, but
    user 1 has no code for 22): A2A = (0.8 v1 + 0.2 v2) / 1.0. Item 11's only neighbour is 22: nothing. Item 13
    lists 20 with similarity -0.5: never used. Item 14 has its own pair, which neither feeds nor blocks A2A."""
    v = vecs(3, seed=21)
    put_pair(store, version, 1, 20, v[0])
    put_pair(store, version, 1, 21, v[1])
    put_pair(store, version, 1, 14, v[2])
    put_pair(store, version, 2, 22, vecs(1, seed=22)[0])  # another user's code for 22: not user 1's
    store.write_item_neighbours(
        "r",
        version,
        np.array([10, 11, 13, 14]),
        np.array([[20, 21, 22], [22, -1, -1], [20, -1, -1], [20, 15, -1]]),
        np.array([[0.8, 0.2, 0.5], [0.9, 0, 0], [-0.5, 0, 0], [1.0, 0.3, 0]]),
        H,
        H + 5 * HOUR,
    )
    got = store.read_tiers(version, 1, np.array([10, 11, 12, 13, 14, 20]), H + HOUR)
    assert got.a2a.dtype == np.float32 and got.a2a.shape == (6, DIM)
    assert got.a2a_mask.tolist() == [True, False, False, False, True, False]
    np.testing.assert_allclose(got.a2a[0], (0.8 * v[0] + 0.2 * v[1]) / 1.0, **TOL)
    np.testing.assert_allclose(got.a2a[4], v[0], **TOL)
    assert not got.a2a[[1, 2, 3, 5]].any()
    assert got.pair_mask.tolist() == [False, False, False, False, True, True]
    np.testing.assert_array_equal(got.pair[4], v[2])
    other = store.read_tiers(version, 3, np.array([10, 14]), H + HOUR)  # no codes of its own: no A2A
    assert not other.a2a_mask.any() and not other.a2a.any()


def test_batch_read_answers_each_pair_with_its_own_users_codes(store: FeatureStore, version: str) -> None:
    v = vecs(2, seed=23)
    put_pair(store, version, 1, 20, v[0])
    put_pair(store, version, 2, 20, v[1])
    put_list(store, version, 10, [20], [0.5])
    got = store.read_tiers_batch(version, np.array([2, 1, 3, 1]), np.array([10, 10, 10, 11]), H)
    assert got.a2a_mask.tolist() == [True, True, False, False]
    np.testing.assert_allclose(got.a2a[:2], v[[1, 0]], **TOL)
    for row, user in enumerate([2, 1, 3]):
        one = store.read_tiers(version, user, np.array([10]), H)
        np.testing.assert_array_equal(one.a2a[0], got.a2a[row])


def test_both_the_list_and_the_users_pair_must_be_fresh_at_t(store: FeatureStore, version: str) -> None:
    """Item 10's list is created at H+2; item 11's list is old but the pair it needs, (1, 21), is created at
    H+2 and expires at H+4; item 12's list expires at H+3. A row is used only while created_at <= t < expires_at."""
    v = vecs(2, seed=24)
    put_pair(store, version, 1, 20, v[0])
    put_pair(store, version, 1, 21, v[1], created=H + 2 * HOUR, expires=H + 4 * HOUR)
    put_list(store, version, 10, [20], [0.7], created=H + 2 * HOUR)
    put_list(store, version, 11, [21], [0.7])
    put_list(store, version, 12, [20], [0.7], expires=H + 3 * HOUR)
    items = np.array([10, 11, 12])
    expected = {
        H + HOUR: [False, False, True],
        H + 2 * HOUR - HOUR / 3_600_000_000: [False, False, True],
        H + 2 * HOUR: [True, True, True],
        H + 3 * HOUR: [True, True, False],
        H + 4 * HOUR: [True, False, False],
        H + 5 * HOUR: [False, False, False],
    }
    for t, mask in expected.items():
        got = store.read_tiers(version, 1, items, t)
        assert got.a2a_mask.tolist() == mask, t
        assert not got.a2a[~got.a2a_mask].any()
    np.testing.assert_allclose(store.read_tiers(version, 1, items, H + 2 * HOUR).a2a, v[[0, 1, 0]], **TOL)


def test_rows_of_another_version_are_never_used(store: FeatureStore, version: str) -> None:
    other = store.register_embedding_version("4", "2", DIM, created_at=T0)
    put_pair(store, version, 1, 20, vecs(1, seed=25)[0])
    put_list(store, other, 10, [20], [0.9])  # the pair (1, 20) it names is of `version`
    put_pair(store, other, 1, 21, vecs(1, seed=26)[0])
    put_list(store, other, 11, [21], [0.9])
    assert not store.read_tiers(version, 1, np.array([10, 11]), H).a2a_mask.any()
    assert store.read_tiers(other, 1, np.array([10, 11]), H).a2a_mask.tolist() == [False, True]


def test_a_write_replaces_each_listed_items_list_whole(store: FeatureStore, version: str) -> None:
    v = vecs(2, seed=27)
    put_pair(store, version, 1, 20, v[0])
    put_pair(store, version, 1, 21, v[1])
    assert put_list(store, version, 10, [20, 21, 22], [1.0, 1.0, 1.0]) == 1
    written = store.write_item_neighbours(
        "r", version, np.array([10, 11]), np.array([[21, -1], [-1, -1]]), np.ones((2, 2)), H, H + HOUR
    )
    assert written == 2  # item 11's empty list is written too: it has none
    assert count_rows(store, "item_neighbours") == 2  # one row per item, its list packed
    got = store.read_tiers(version, 1, np.array([10, 11]), H)
    assert got.a2a_mask.tolist() == [True, False]
    np.testing.assert_allclose(got.a2a[0], v[1], **TOL)


@pytest.mark.parametrize(
    ("change", "message"),
    [
        (dict(item_ids=np.array([7, 8, 7])), r"item_id \[7\] appears twice in the batch, at rows 0 and 2"),
        (dict(neighbour_ids=np.array([1, 2, 3])), r"neighbour_ids must be a 2-D integer array with 3 rows"),
        (dict(neighbour_ids=np.array([[1, 2]] * 2)), r"neighbour_ids must be a 2-D integer array with 3 rows"),
        (dict(similarities=np.ones((3, 1))), r"similarities has shape \(3, 1\), expected \(3, 2\)"),
        (dict(similarities=np.array([[0.5, 0.5], [0.5, np.inf], [0.5, 0.5]])), "similarities row 1 holds NaN"),
        (dict(similarities=np.array([[0.5, 0.5], [0.5, 0.5], [np.nan, 0.5]])), "similarities row 2 holds NaN"),
        (dict(neighbour_ids=np.array([[1, 2], [8, 3], [4, 5]])), "neighbour_ids row 1 lists the item itself"),
        (dict(neighbour_ids=np.array([[1, 2], [3, -2], [4, 5]])), "pad with -1 only"),
        (dict(neighbour_ids=np.array([[1, 1], [3, 4], [4, 5]])), r"\(item_id, neighbour_id\) \[7, 1\] appears twice"),
        (dict(item_ids=np.array([7, -8, 9])), "item_ids row 1 is negative"),
        (dict(version="fm9-ae9-d8"), "unknown embedding version 'fm9-ae9-d8'"),
        (dict(expires_at=H), "is not after created_at"),
    ],
)
def test_bad_batches_are_refused_whole(store: FeatureStore, version: str, change: dict, message: str) -> None:
    put_list(store, version, 7, [30], [0.5])
    args = (
        dict(
            run_id="r",
            version=version,
            item_ids=np.array([7, 8, 9]),
            neighbour_ids=np.array([[1, 2], [3, 4], [4, 5]]),
            similarities=np.full((3, 2), 0.5),
            created_at=H,
            expires_at=H + HOUR,
        )
        | change
    )
    with pytest.raises(StoreError, match=message):
        store.write_item_neighbours(**args)
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.exec_driver_sql("SELECT item_id, neighbours FROM item_neighbours").all()
    [(item, packed)] = rows
    ids, sims = decode_lists(bytes(packed), np.array([len(packed) // 8]))
    assert (item, ids.tolist(), sims.tolist()) == (7, [30], [0.5])  # nothing written, the old list kept


def test_init_schema_adds_the_item_lists_to_a_store_made_before_them(store: FeatureStore, version: str) -> None:
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.exec_driver_sql("DROP TABLE item_neighbours")
    store.init_schema()
    store.init_schema()
    assert put_list(store, version, 10, [20], [0.5]) == 1
    assert count_rows(store, "item_neighbours") == 1


def test_a_reader_serves_the_lists_another_process_wrote_or_expired_after_its_last_read(
    make_store: StoreFactory,
) -> None:
    """The ranker holds each version's lists in memory; a rerun of the hour that rewrites them under the same
    stamp, and an expiry that deletes them, reach it by the lists' generation, on its next read."""
    reader = make_store()
    writer = make_store(same_as=reader)  # the precompute's own connection to the same database
    version = writer.register_embedding_version("3", "2", DIM, created_at=T0)
    v = vecs(2, seed=28)
    put_pair(writer, version, 1, 20, v[0], expires=H + 10 * HOUR)
    put_pair(writer, version, 1, 21, v[1], expires=H + 10 * HOUR)
    put_list(writer, version, 10, [20], [0.5])
    np.testing.assert_allclose(reader.read_tiers(version, 1, np.array([10]), H).a2a[0], v[0], **TOL)
    put_list(writer, version, 10, [21], [0.5])
    np.testing.assert_allclose(reader.read_tiers(version, 1, np.array([10]), H).a2a[0], v[1], **TOL)
    assert writer.expire(H + 5 * HOUR)["item_neighbours"] == 1
    assert not reader.read_tiers(version, 1, np.array([10]), H).a2a_mask.any()  # as the table has it now


def test_lists_written_before_their_generations_are_served_once_the_schema_is_initialised(
    store: FeatureStore, version: str
) -> None:
    v = vecs(1, seed=29)
    put_pair(store, version, 1, 20, v[0])
    put_list(store, version, 10, [20], [0.5])
    with store.engine.begin() as conn:  # type: ignore[attr-defined]
        conn.exec_driver_sql("DELETE FROM item_list_generations")  # as a store from before them
    assert not store.read_tiers(version, 1, np.array([10]), H).a2a_mask.any()
    store.init_schema()
    np.testing.assert_allclose(store.read_tiers(version, 1, np.array([10]), H).a2a[0], v[0], **TOL)
