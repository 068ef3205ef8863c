"""The cohort tier's read: a user with no counters and no pair code of its own gets its cohort's fresh code
in the pair slot, flagged ``cohort_mask``; every other row is left as the other tiers made it."""

from __future__ import annotations

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0, vecs

from solaris import exposure
from solaris.store import FeatureStore, StoreError
from solaris.store.cohorts import prototype_ids
from solaris.store.errors import StoreReadTimeout
from solaris.store.records import ExposureCounts

W = len(exposure.WINDOWS_H)
COHORT_A, COHORT_B = 5, 9
ITEMS = np.array([10, 20])


def write_cohort_codes(store: FeatureStore, version: str, start=T0, hours: int = 1) -> np.ndarray:
    """Codes of cohorts A and B for items 10 and 20, rows [A10, A20, B10, B20]."""
    codes = vecs(4, seed=3)
    keys = np.repeat([COHORT_A, COHORT_B], 2)
    store.write_pair_embeddings(
        "r", version, prototype_ids(keys), np.tile(ITEMS, 2), codes, np.zeros(4), start, start + hours * HOUR
    )
    return codes


def shown(users: list[int], user_counts: list[list[int]]) -> ExposureCounts:
    none = np.zeros(0, np.int64)
    return ExposureCounts(np.array(users), np.array(user_counts).reshape(-1, W), none, none, none.reshape(0, W))


def test_a_new_user_reads_its_cohorts_code_and_a_known_one_keeps_its_own_tiers(
    store: FeatureStore, version: str
) -> None:
    codes = write_cohort_codes(store, version)
    own = vecs(1, seed=4)
    store.write_pair_embeddings("r", version, np.array([2]), np.array([20]), own, np.ones(1), T0, T0 + HOUR)
    # User 3 was shown something in the counters' windows: not new. Users 1 and 2 have no counters.
    store.write_exposure_counts("r", shown([3], [[0, 1, 4]]), T0, T0 + HOUR)
    users, items = np.array([1, 1, 2, 2, 3, 4]), np.array([10, 20, 10, 20, 10, 30])
    cohorts = np.array([COHORT_A, COHORT_A, COHORT_B, COHORT_B, COHORT_A, COHORT_A])
    read = store.read_tiers_batch(version, users, items, T0 + HOUR / 2, cohorts=cohorts)
    # User 1: A's codes; user 2: B's code for 10, its own code for 20; user 3: counted, so nothing;
    # user 4: item 30 has no cohort code.
    assert read.cohort_mask.tolist() == [True, True, True, False, False, False]
    assert read.pair_mask.tolist() == [False, False, False, True, False, False]
    np.testing.assert_array_equal(read.pair[:4], np.stack([codes[0], codes[1], codes[2], own[0]]))
    assert not read.pair[4:].any()
    # Without cohorts the read is as before: no cohort code anywhere.
    plain = store.read_tiers_batch(version, users, items, T0 + HOUR / 2)
    assert not plain.cohort_mask.any() and plain.pair_mask.tolist() == read.pair_mask.tolist()


def test_cohort_codes_honour_their_ttl_and_their_version(store: FeatureStore, version: str) -> None:
    write_cohort_codes(store, version)
    other = store.register_embedding_version("4", "2", DIM, created_at=T0)
    users, cohorts = np.array([1, 1]), np.array([COHORT_A, COHORT_A])

    def fed(v: str, t) -> list[bool]:
        return store.read_tiers_batch(v, users, ITEMS, t, cohorts=cohorts).cohort_mask.tolist()

    assert fed(version, T0) == [True, True]
    assert fed(version, T0 - HOUR / 60) == [False, False]  # before it was written
    assert fed(version, T0 + HOUR) == [False, False]  # expired: a code serves the hour it was made for
    assert fed(other, T0) == [False, False]


def test_cohort_keys_are_checked_like_ids(store: FeatureStore, version: str) -> None:
    with pytest.raises(StoreError, match="cohorts has 1 rows, expected 2"):
        store.read_tiers_batch(version, np.array([1, 2]), ITEMS, T0, cohorts=np.array([COHORT_A]))


def test_a_cohort_read_past_the_timeout_keeps_the_tiers_read_in_time(
    store: FeatureStore, version: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    if not store.local_reads:
        pytest.skip("only a local store's read takes a timeout")
    write_cohort_codes(store, version)
    own = vecs(1, seed=4)
    store.write_pair_embeddings("r", version, np.array([2]), np.array([20]), own, np.ones(1), T0, T0 + HOUR)
    read_rows, given = store._read_tier_rows, []  # type: ignore[attr-defined]

    def second_runs_late(conn: object, params: dict, timeout_s: float | None) -> object:
        given.append(timeout_s)
        if len(given) == 2:
            raise StoreReadTimeout("the cohort read ran late")
        return read_rows(conn, params, timeout_s)

    monkeypatch.setattr(store, "_read_tier_rows", second_runs_late)
    read = store.read_tiers_batch(version, np.array([2, 2]), ITEMS, T0, 5.0, np.array([COHORT_B, COHORT_B]))
    assert read.pair_mask.tolist() == [False, True] and not read.cohort_mask.any()
    np.testing.assert_array_equal(read.pair[1], own[0])
    assert given[0] == 5.0 and given[1] <= 5.0  # the cohort read gets what is left of the timeout
