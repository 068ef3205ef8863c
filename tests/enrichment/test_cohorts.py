"""Cohort codes are the FM's own code for a user it never saw: one per side-feature cohort, item and hour."""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pytest
import torch
from id_tables import small_id_tables

from solaris.enrichment.cohorts import KEY_BITS, CohortLookup, cohort_keys, user_cohorts
from solaris.models.features import HistoryIndex, pair_matrix
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.precompute.cohort_codes import largest_cohorts
from solaris.store.cohorts import COHORT_USER_BASE, new_user_rows, prototype_ids

HOUR_US = 3_600_000_000


@pytest.fixture(scope="module")
def fm_and_history() -> tuple[FoundationModel, HistoryIndex]:
    """Users 0-5 of countries 0 1 2 0 1 2; users 0 and 1 trained, with id rows far from the unknown row."""
    torch.manual_seed(0)
    users, items = small_id_tables()
    fm = FoundationModel(FMConfig(history=8, hidden=64, embedding_dim=32), users, items).eval()
    with torch.no_grad():
        torch.nn.init.normal_(fm.user.ids.weight)
        fm.user.trained[fm.user.rows(torch.tensor([0, 1]))] = True
    empty = pa.table(
        {
            "user_id": pa.array([], pa.int64()),
            "ts": pa.array([], pa.timestamp("us", tz="UTC")),
            "item_id": pa.array([], pa.int64()),
            "click": pa.array([], pa.int8()),
            "conversion": pa.array([], pa.int8()),
        }
    )
    return fm, HistoryIndex.from_table(empty)


def embedding(fm: FoundationModel, index: HistoryIndex, users: list[int], new_users: bool) -> np.ndarray:
    n = len(users)
    x = pair_matrix(np.array(users), np.full(n, 2), np.full(n, 7 * HOUR_US), np.zeros(n, np.int64), index, 8)
    return embed(fm, x, device="cpu", new_users=new_users).embedding


def test_a_trained_users_new_user_code_is_an_unseen_same_cohort_users_code(fm_and_history: tuple) -> None:
    fm, index = fm_and_history
    as_new = embedding(fm, index, [0], new_users=True)
    unseen_same_country = embedding(fm, index, [3], new_users=False)
    np.testing.assert_allclose(as_new, unseen_same_country, rtol=1e-6)
    # Its id row matters when it is read as itself, and another cohort's code differs: the check can fail.
    assert not np.allclose(embedding(fm, index, [0], new_users=False), unseen_same_country, atol=1e-3)
    assert not np.allclose(embedding(fm, index, [4], new_users=True), unseen_same_country, atol=1e-3)
    # An unseen user is the same as itself either way.
    np.testing.assert_allclose(embedding(fm, index, [3], new_users=True), unseen_same_country, rtol=1e-6)


def test_users_share_a_cohort_key_exactly_when_they_share_side_features(fm_and_history: tuple) -> None:
    fm, _ = fm_and_history
    keys = user_cohorts(fm.user, np.array([0, 3, 1, 4, 2, 99]))
    assert keys[0] == keys[1] and keys[2] == keys[3]
    assert len({keys[0], keys[2], keys[4], keys[5]}) == 4
    assert keys[5] == 0  # an id outside the table: every feature unknown
    assert (prototype_ids(keys) >= COHORT_USER_BASE).all()


def test_the_rankers_lookup_finds_the_row_the_model_reads(fm_and_history: tuple) -> None:
    fm, _ = fm_and_history
    ids = np.array([-3, 0, 5, 6, 7, 2**40])  # below, inside, at and past the table's end
    rows = fm.user.rows(torch.as_tensor(ids))
    np.testing.assert_array_equal(CohortLookup(fm.user)(ids), cohort_keys(fm.user.features[rows].numpy()))


def test_cohort_keys_take_any_width_and_cardinality_and_refuse_what_is_no_code() -> None:
    """An imported log may hold many side features or thousands of categories (a zip code): keys still form,
    distinct rows get distinct keys, the same row always the same one, and the all-unknown row key 0."""
    rng = np.random.default_rng(0)
    codes = np.unique(rng.integers(0, 50_000, size=(20_000, 9)), axis=0)
    keys = cohort_keys(codes)
    assert len(np.unique(keys)) == len(codes) and (keys >= 0).all() and (keys < 2**KEY_BITS).all()
    np.testing.assert_array_equal(cohort_keys(codes[::-1]), keys[::-1])
    assert cohort_keys(np.array([[1, 2], [2, 1]]))[0] != cohort_keys(np.array([[1, 2], [2, 1]]))[1]  # order counts
    assert cohort_keys(np.zeros((3, 4), np.int64)).tolist() == [0, 0, 0]
    assert (prototype_ids(keys) > 0).all()  # no int64 overflow in the store's prototype ids
    with pytest.raises(ValueError, match="at least 0"):
        cohort_keys(np.array([[-1]]))
    with pytest.raises(ValueError, match="side-feature codes, got shape"):
        cohort_keys(np.zeros(7, np.int64))


def test_only_rows_without_counters_or_an_own_code_are_new() -> None:
    counts = np.array([[0, 0, 0], [0, 0, 1], [0, 0, 0]])
    assert new_user_rows(counts, np.array([False, False, True])).tolist() == [True, False, False]


def test_the_largest_cohorts_come_first_each_with_its_smallest_member() -> None:
    keys, users = np.array([7, 5, 7, 5, 7, 3]), np.array([40, 11, 12, 10, 30, 50])
    chosen, members = largest_cohorts(keys, users, 2)
    assert chosen.tolist() == [7, 5] and members.tolist() == [12, 10]
