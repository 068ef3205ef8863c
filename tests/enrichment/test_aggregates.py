from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
import pytest

from solaris.enrichment.aggregates import user_aggregates

AS_OF = datetime(2026, 11, 30, 1, tzinfo=UTC)


def stamp(t: datetime) -> np.datetime64:
    return np.datetime64(t.replace(tzinfo=None), "us")


def test_means_per_user_match_a_hand_computation() -> None:
    users = np.array([7, 3, 7, 3, 7])
    vectors = np.array([[1, 0], [2, 2], [3, 0], [4, 6], [5, 3]], dtype=np.float32)
    created = np.array([stamp(AS_OF - timedelta(hours=h)) for h in (1, 2, 3, 4, 5)])
    ids, means, counts = user_aggregates(users, vectors, created, AS_OF)
    assert ids.tolist() == [3, 7]
    assert counts.tolist() == [2, 3]
    np.testing.assert_allclose(means, [[3, 4], [3, 1]])
    assert means.dtype == np.float32


def test_window_is_open_at_the_start_and_closed_at_as_of() -> None:
    users = np.array([1, 1, 1, 1])
    vectors = np.array([[100.0], [10.0], [20.0], [1000.0]])
    created = np.array(
        [
            stamp(AS_OF - timedelta(hours=24)),  # exactly as_of - 24 h: out
            stamp(AS_OF - timedelta(hours=24) + timedelta(microseconds=1)),  # in
            stamp(AS_OF),  # exactly as_of: in
            stamp(AS_OF + timedelta(microseconds=1)),  # the future: out
        ]
    )
    ids, means, counts = user_aggregates(users, vectors, created, AS_OF)
    assert counts.tolist() == [2]
    np.testing.assert_allclose(means, [[15.0]])


def test_other_window_lengths_and_an_empty_window() -> None:
    users = np.array([1, 2])
    created = np.array([stamp(AS_OF - timedelta(hours=3)), stamp(AS_OF - timedelta(minutes=30))])
    ids, _, _ = user_aggregates(users, np.ones((2, 4)), created, AS_OF, window_hours=1)
    assert ids.tolist() == [2]
    ids, means, counts = user_aggregates(users, np.ones((2, 4)), created, AS_OF - timedelta(days=2))
    assert ids.shape == (0,) and means.shape == (0, 4) and counts.shape == (0,)


def test_bad_inputs_name_the_problem() -> None:
    created = np.array([stamp(AS_OF)] * 2)
    with pytest.raises(TypeError, match="pair_created_at: expected a numpy datetime64"):
        user_aggregates(np.array([1, 2]), np.ones((2, 3)), np.array([1, 2]), AS_OF)
    with pytest.raises(ValueError, match="differ in length"):
        user_aggregates(np.array([1, 2, 3]), np.ones((2, 3)), created, AS_OF)
    with pytest.raises(ValueError, match="no timezone"):
        user_aggregates(np.array([1, 2]), np.ones((2, 3)), created, AS_OF.replace(tzinfo=None))
