"""The demand model's features: counted right on a hand-built log, and blind to anything at or after ``at``."""

from __future__ import annotations

import math
from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from precompute_logs import T0, LogFactory

from solaris.precompute.candidates import generate_candidates
from solaris.precompute.demand_features import NAMES, columns, demand_features, item_listings, item_listings_of

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


def pool(strength: list[int] | None = None) -> pd.DataFrame:
    strength = [0] * len(PAIRS[0]) if strength is None else strength
    return pd.DataFrame({"user_id": PAIRS[0], "item_id": PAIRS[1], "covisit_strength": strength})


def features(make_log: LogFactory, requests: list, strength: list[int] | None = None) -> dict[str, np.ndarray]:
    x = demand_features(make_log(requests), pool(strength), AT, ttl_hours=4)
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


def test_covisitation_is_the_generators_own_score(make_log: LogFactory) -> None:
    # heads: [10, 11, 12] and [11, 13] co-occur; user 1's seeds are 11, 13, 12, 10 (newest first), user 2's 10
    found = generate_candidates(make_log(REQUESTS), AT, AT + H)
    strength = {
        (u, i): c for u, i, c in zip(found["user_id"], found["item_id"], found["covisit_strength"], strict=True)
    }
    # (1, 11): partner of 13, 12 and 10 once each; (1, 12): of 11 and 10; (1, 10): of 11 and 12 (kept as recent)
    assert [strength[1, 11], strength[1, 12], strength[1, 10]] == [3, 2, 2]
    # user 2's co-visit source offers 11 and 12 (partners of its seed 10, once each); 10 itself is recent
    proposed = found.query("user_id == 2 and source == 'covisit'")
    assert sorted(proposed["item_id"]) == [11, 12] and [strength[2, 11], strength[2, 12], strength[2, 10]] == [1, 1, 0]
    f = features(make_log, REQUESTS, strength=[3, 2, 0, 0, 0])  # the pool's figure, as the feature reads it
    np.testing.assert_allclose(np.expm1(f["pair_covisit_strength"]), [3, 2, 0, 0, 0], atol=1e-5)


def test_a_model_reads_its_own_columns_by_name() -> None:
    x = np.arange(2 * len(NAMES), dtype=np.float32).reshape(2, len(NAMES))
    picked = columns(x, ("pair_covisit_strength", "user_requests_1h"))
    np.testing.assert_array_equal(picked, x[:, [NAMES.index("pair_covisit_strength"), NAMES.index("user_requests_1h")]])
    with pytest.raises(ValueError, match="user_mood"):
        columns(x, ("user_requests_1h", "user_mood"))


def test_the_listings_counted_an_hour_at_a_time_are_the_days(make_log: LogFactory) -> None:
    """The candidates step counts every user's listings an hour of the log at a time: what the whole day's
    requests count, item for item and window for window, and the same longest list."""
    log = make_log([*REQUESTS, (AT - 5 * H, 4, [10, 11, 12, 13, 14]), (AT - 30 * timedelta(minutes=1), 2, [14])])
    whole = item_listings(log.requests(AT - 24 * H, AT, columns=["ts", "candidates"]), AT)
    by_hour = item_listings_of(log, AT)
    assert by_hour.item_ids.tolist() == whole.item_ids.tolist() == [10, 11, 12, 13, 14]
    assert by_hour.counts.tolist() == whole.counts.tolist() and by_hour.list_width == whole.list_width == 5
    assert by_hour.counts[:, 0].tolist() == [0, 1, 0, 1, 1]  # the last hour: (1, [11, 13]) and (2, [14])
