"""The demand model's features: counted right on a hand-built log, and blind to anything at or after ``at``."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np

from solaris.precompute.demand_features import NAMES, demand_features

from precompute_logs import T0, LogFactory

H = timedelta(hours=1)
AT = T0 + 27 * H
REQUESTS = [
    (T0, 9, [50]),  # starts the log a day before, outside the 24 h lookback
    (AT - 24 * H + 30 * timedelta(minutes=1), 1, [10]),  # this time yesterday
    (AT - 2.5 * H, 1, [10, 11, 12]),
    (AT - 50 * timedelta(minutes=1), 1, [11, 13]),
    (AT - 2 * H, 2, [10]),
]
PAIRS = ([1, 1, 1, 2, 3], [11, 12, 99, 10, 10])


def features(make_log: LogFactory, requests: list) -> dict[str, np.ndarray]:
    x = demand_features(make_log(requests), np.array(PAIRS[0]), np.array(PAIRS[1]), AT, ttl_hours=4)
    return {name: x[:, j] for j, name in enumerate(NAMES)}


def test_counts_recency_and_positions(make_log: LogFactory) -> None:
    f = features(make_log, REQUESTS)
    last = 50 / 60
    np.testing.assert_allclose(f["user_hours_since_last"][[0, 3, 4]], np.log1p([last, 2.0, 24.0]), rtol=1e-6)
    np.testing.assert_allclose(np.expm1(f["user_requests_1h"][:3]), 1)
    np.testing.assert_allclose(np.expm1(f["user_requests_6h"][:3]), 2)
    np.testing.assert_allclose(np.expm1(f["user_requests_24h"][:3]), 3)
    np.testing.assert_allclose(np.expm1(f["user_requests_same_time_yesterday"][[0, 3]]), [1, 0])
    # (1, 11): listed twice, last 50 minutes ago at position 0 of 3; (1, 12) once at position 2; (1, 99) never
    np.testing.assert_allclose(np.expm1(f["pair_times_listed"][:3]), [2, 1, 0], atol=1e-6)
    np.testing.assert_allclose(f["pair_hours_since_listed"][:3], np.log1p([last, 2.5, 24.0]), rtol=1e-6)
    np.testing.assert_allclose(f["pair_never_listed"], [0, 0, 1, 0, 1])
    np.testing.assert_allclose(f["pair_best_position"][:3], [0, 2 / 3, 1], atol=1e-6)
    np.testing.assert_allclose(f["pair_share_of_user_requests"][:3], [2 / 3, 1 / 3, 0], atol=1e-6)
    # item 10: listed 2.5 h and 2 h ago (and 23.5 h ago): none within the hour, two within 6 h, three in a day
    np.testing.assert_allclose(np.expm1(f["item_listed_1h"][3:]), 0, atol=1e-6)
    np.testing.assert_allclose(np.expm1(f["item_listed_6h"][3:]), 2, atol=1e-5)
    np.testing.assert_allclose(np.expm1(f["item_listed_24h"][3:]), 3, atol=1e-5)
    np.testing.assert_allclose(f["hour_sin"], math.sin(2 * math.pi * AT.hour / 24), atol=1e-6)


def test_requests_at_or_after_the_time_are_invisible(make_log: LogFactory) -> None:
    later = [(AT, 1, [12, 99]), (AT + 2 * H, 3, [10])]
    np.testing.assert_array_equal(
        np.stack(list(features(make_log, REQUESTS).values())),
        np.stack(list(features(make_log, REQUESTS + later).values())),
    )
    earlier = [(AT - timedelta(minutes=1), 1, [12, 99])]  # control: one minute before does count
    assert not np.array_equal(
        np.stack(list(features(make_log, REQUESTS).values())),
        np.stack(list(features(make_log, REQUESTS + earlier).values())),
    )
