"""Bulk writes: idempotent upserts, whole-batch refusal of bad input, versions and run records."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0, count_rows, vecs

from solaris.store import FeatureStore, StoreError


def write_pairs(store: FeatureStore, version: str, run_id: str, users, items, vectors, expires=T0 + 3 * HOUR):
    return store.write_pair_embeddings(
        run_id, version, np.asarray(users), np.asarray(items), vectors, np.linspace(0, 1, len(users)), T0, expires
    )


def test_version_id_is_deterministic_and_registration_idempotent(store: FeatureStore) -> None:
    first = store.register_embedding_version("3", "2", 32, created_at=T0)
    again = store.register_embedding_version("3", "2", 32, created_at=T0 + HOUR)
    assert first == again == "fm3-ae2-d32"
    assert count_rows(store, "embedding_versions") == 1
    got = store.get_embedding_version(first)
    assert (got.fm_version, got.ae_version, got.dim, got.dtype, got.created_at) == ("3", "2", 32, "float16", T0)
    assert store.register_embedding_version("3", "2", 32, "float32", created_at=T0) != first


def test_rewriting_a_run_replaces_its_rows(store: FeatureStore, version: str) -> None:
    users, items = [1, 1, 2], [10, 11, 10]
    write_pairs(store, version, "run-a", users, items, vecs(3, seed=1))
    write_pairs(store, version, "run-a", users, items, vecs(3, seed=2))
    assert count_rows(store, "pair_embeddings") == 3
    got = store.read_tiers(version, 1, np.array([10, 11]), T0)
    np.testing.assert_array_equal(got.pair, vecs(3, seed=2)[:2])


def test_rewrite_with_a_later_expiry_leaves_one_row(store: FeatureStore, version: str) -> None:
    """On PostgreSQL the new expiry lands in another partition; the old row must still go."""
    write_pairs(store, version, "run-a", [1], [10], vecs(1, seed=1), expires=T0 + HOUR)
    write_pairs(store, version, "run-b", [1], [10], vecs(1, seed=2), expires=T0 + 5 * HOUR)
    assert count_rows(store, "pair_embeddings") == 1
    later = store.read_tiers(version, 1, np.array([10]), T0 + 2 * HOUR)
    assert later.pair_mask.tolist() == [True]
    np.testing.assert_array_equal(later.pair[0], vecs(1, seed=2)[0])


def test_neighbour_lists_are_replaced_whole(store: FeatureStore, version: str) -> None:
    store.write_user_neighbours("r", version, np.array([1]), np.array([[2, 3, 4]]), np.ones((1, 3)), T0, T0 + HOUR)
    store.write_user_neighbours("r", version, np.array([1]), np.array([[5, -1, -1]]), np.ones((1, 3)), T0, T0 + HOUR)
    assert count_rows(store, "user_neighbours") == 1


def test_aggregates_upsert(store: FeatureStore, version: str) -> None:
    for seed in (1, 2):
        store.write_user_aggregates("r", version, np.array([7]), vecs(1, seed), np.array([3]), 24, T0, T0 + HOUR)
    assert count_rows(store, "user_aggregates") == 1
    np.testing.assert_array_equal(store.read_tiers(version, 7, np.array([1]), T0).user_agg, vecs(1, 2)[0])


def test_writes_larger_than_a_block_land_whole(store: FeatureStore, version: str, monkeypatch) -> None:
    """SQLite binds a write's rows a block at a time (a million users' rows as one list took gigabytes); every
    row of every block lands, in the one transaction."""
    monkeypatch.setattr("solaris.store.sqlite.WRITE_BLOCK_ROWS", 4)
    users, items = np.repeat([1, 2], 5), np.tile(np.arange(10, 15), 2)
    assert write_pairs(store, version, "r", users, items, vecs(10, seed=3)) == 10
    got = store.read_tiers(version, 2, np.arange(10, 15), T0)
    np.testing.assert_array_equal(got.pair, vecs(10, seed=3)[5:])
    owners = np.arange(1, 4)
    store.write_user_neighbours("r", version, owners, owners[:, None] + [10, 20, 30], np.ones((3, 3)), T0, T0 + HOUR)
    assert count_rows(store, "user_neighbours") == 9
    store.write_user_aggregates("r", version, np.arange(9), vecs(9, 4), np.ones(9, int), 24, T0, T0 + HOUR)
    assert count_rows(store, "user_aggregates") == 9
    np.testing.assert_array_equal(store.read_tiers(version, 8, np.array([1]), T0).user_agg, vecs(9, 4)[8])
    items = np.arange(100, 106)
    store.write_item_neighbours("r", version, items, np.roll(items, 1)[:, None], np.ones((6, 1)), T0, T0 + HOUR)
    assert count_rows(store, "item_neighbours") == 6


BAD_PAIR_BATCHES = {
    "dimension": (dict(vectors=vecs(3, dim=DIM + 1)), "dimension 9"),
    "nan": (dict(vectors=np.where(np.arange(DIM) == 2, np.nan, vecs(3))), "vectors row 0 holds NaN"),
    "inf": (dict(vectors=np.vstack([vecs(2), np.full((1, DIM), np.inf)])), "vectors row 2 holds NaN or infinite"),
    "float16 overflow": (dict(vectors=np.vstack([vecs(1), np.full((2, DIM), 1e6)])), "row 1 holds NaN or infinite"),
    "score nan": (dict(scores=np.array([0.1, np.nan, 0.3])), "scores row 1"),
    "unknown version": (dict(version="fm9-ae9-d8"), "unknown embedding version 'fm9-ae9-d8'"),
    "expiry before creation": (dict(expires_at=T0 - HOUR), "is not after created_at"),
    "expiry at creation": (dict(expires_at=T0), "is not after created_at"),
    "duplicate key": (dict(item_ids=np.array([10, 11, 10]), user_ids=np.array([1, 2, 1])), "at rows 0 and 2"),
    "length": (dict(item_ids=np.array([10, 11])), "item_ids has 2 rows, expected 3"),
    "negative id": (dict(user_ids=np.array([1, -2, 3])), "user_ids row 1 is negative"),
}


@pytest.mark.parametrize("case", BAD_PAIR_BATCHES)
def test_bad_pair_batches_are_refused_whole(store: FeatureStore, version: str, case: str) -> None:
    change, message = BAD_PAIR_BATCHES[case]
    args = (
        dict(
            run_id="r",
            version=version,
            user_ids=np.array([1, 2, 3]),
            item_ids=np.array([10, 10, 10]),
            vectors=vecs(3),
            scores=np.ones(3),
            created_at=T0,
            expires_at=T0 + HOUR,
        )
        | change
    )
    with pytest.raises(StoreError, match=message.replace("(", r"\(").replace("[", r"\[")):
        store.write_pair_embeddings(**args)
    assert count_rows(store, "pair_embeddings") == 0


def test_naive_times_are_refused(store: FeatureStore, version: str) -> None:
    with pytest.raises(ValueError, match="created_at=.* is naive"):
        store.write_pair_embeddings(
            "r", version, np.array([1]), np.array([1]), vecs(1), np.ones(1), T0.replace(tzinfo=None), T0 + HOUR
        )


@pytest.mark.parametrize(
    ("neighbours", "sims", "message"),
    [
        ([[2, 1]], [[0.5, 0.5]], "lists the user itself"),
        ([[2, -3]], [[0.5, 0.5]], "pad with -1 only"),
        ([[2, 2]], [[0.5, 0.5]], "appears twice"),
        ([[2, 3]], [[0.5, np.nan]], "similarities row 0"),
        ([[2, 3]], [[0.5]], r"similarities has shape \(1, 1\)"),
    ],
)
def test_bad_neighbour_batches_are_refused_whole(
    store: FeatureStore, version: str, neighbours: list, sims: list, message: str
) -> None:
    with pytest.raises(StoreError, match=message):
        store.write_user_neighbours("r", version, np.array([1]), np.array(neighbours), np.array(sims), T0, T0 + HOUR)
    assert count_rows(store, "user_neighbours") == 0


def test_aggregate_dimension_is_checked(store: FeatureStore, version: str) -> None:
    with pytest.raises(StoreError, match="dimension 4, embedding version fm3-ae2-d8 has 8"):
        store.write_user_aggregates("r", version, np.array([1]), vecs(1, dim=4), np.array([1]), 24, T0, T0 + HOUR)
    assert count_rows(store, "user_aggregates") == 0


def test_run_records(store: FeatureStore, version: str) -> None:
    for hour in range(3):
        start = T0 + hour * HOUR
        store.start_run(f"run-{hour}", start, start + HOUR, "3", "2", "5", version, start)
    store.finish_run("run-1", "succeeded", {"pairs": 10}, {"embed": 1.5}, T0 + 2 * HOUR)
    run = store.get_run("run-1")
    assert run is not None and run.status == "succeeded"
    assert (run.counts, run.timings, run.finished_at) == ({"pairs": 10}, {"embed": 1.5}, T0 + 2 * HOUR)
    assert [r.run_id for r in store.recent_runs(2)] == ["run-2", "run-1"]
    assert (run.selector, run.selector_reason) == (None, None)
    why = "the demand model's validation AUC 0.650 is under demand_auc_floor 0.72"
    store.start_run("run-1", T0 + HOUR, T0 + 2 * HOUR, "3", "2", "5", version, T0 + 3 * HOUR, "verifier", why)
    retried = store.get_run("run-1")
    assert retried is not None and (retried.status, retried.counts, retried.finished_at) == ("running", {}, None)
    assert (retried.selector, retried.selector_reason) == ("verifier", why)  # a retry records its own choice
    assert store.recent_runs(3)[1].selector == "verifier"
    assert store.get_run("nope") is None


@pytest.mark.parametrize(
    ("run_id", "status", "message"),
    [("run-0", "done", "not one of succeeded, failed"), ("ghost", "failed", "never started")],
)
def test_finish_run_refuses_bad_input(
    store: FeatureStore, version: str, run_id: str, status: str, message: str
) -> None:
    store.start_run("run-0", T0, T0 + HOUR, "3", "2", "5", version, T0)
    with pytest.raises(StoreError, match=message):
        store.finish_run(run_id, status, {}, {}, T0 + HOUR)
