from __future__ import annotations

from datetime import timedelta

import numpy as np
import pandas as pd
import pytest
from precompute_logs import T0, LogFactory, Request

from solaris.precompute.candidates import (
    SOURCES,
    CandidateConfig,
    RequestStats,
    candidates_of,
    count_by_source,
    generate_candidates,
    request_stats,
)
from solaris.precompute.spec import UserShard

START = T0 + timedelta(hours=24)
END = START + timedelta(hours=1)
H = timedelta(hours=1)

# User 1 was shown [10, 11, 12] an hour ago; items 10 and 20 co-occur in other users' request heads;
# item 30 is the most requested (popular) but never next to what user 1 saw; nor is item 40.
BASE: list[Request] = [
    (START - H, 1, [10, 11, 12]),
    *[(START - 2 * H, 100 + u, [10, 20]) for u in range(5)],
    *[(START - 3 * H, 200 + u, [40, 30]) for u in range(5)],
    *[(START - 3 * H, 300 + u, [30]) for u in range(5)],
]


def pairs_of(frame: pd.DataFrame) -> dict[tuple[int, int], str]:
    return {(u, i): s for u, i, s in zip(frame["user_id"], frame["item_id"], frame["source"], strict=True)}


def test_each_source_contributes_and_pairs_keep_their_best_source(make_log: LogFactory) -> None:
    frame = generate_candidates(make_log(BASE), START, END, CandidateConfig(popular_items=1))
    pairs = pairs_of(frame)
    assert len(pairs) == len(frame), "a (user, item) pair appears twice"
    assert pairs[(1, 10)] == "recent"  # also co-visited with 20: recent wins
    assert pairs[(1, 20)] == "covisit"
    assert pairs[(1, 30)] == "popular"
    assert (1, 40) not in pairs
    assert count_by_source(frame) == frame["source"].value_counts().reindex(list(SOURCES)).to_dict()
    assert list(frame["source"].cat.categories) == list(SOURCES)


def test_nothing_at_or_after_interval_start_is_read(make_log: LogFactory) -> None:
    # A burst at exactly interval_start and later would add users, items and popularity if it were read.
    later = [(START + timedelta(minutes=m), 900 + m, [77, 78, 10]) for m in range(0, 120, 10)]
    config = CandidateConfig(popular_items=2)
    before = generate_candidates(make_log(BASE), START, END, config)
    with_future = generate_candidates(make_log(BASE + later), START, END, config)
    pd.testing.assert_frame_equal(before, with_future)
    assert not set(with_future["user_id"]) & {900 + m for m in range(0, 120, 10)}


def test_requests_older_than_the_lookback_are_ignored(make_log: LogFactory) -> None:
    old = [(START - timedelta(hours=30), 7, [55])]
    frame = generate_candidates(make_log(BASE + old), START, END, CandidateConfig())
    assert 7 not in set(frame["user_id"]) and 55 not in set(frame["item_id"])


def test_per_user_cap_keeps_the_highest_priority_pairs(make_log: LogFactory) -> None:
    config = CandidateConfig(per_user_cap=2, popular_items=1)
    frame = generate_candidates(make_log(BASE), START, END, config)
    assert frame.groupby("user_id").size().max() == 2
    # User 1 has three recent items; the cap keeps the first two in retrieval order.
    assert pairs_of(frame[frame["user_id"] == 1]) == {(1, 10): "recent", (1, 11): "recent"}


def test_only_the_latest_requests_feed_the_recent_source(make_log: LogFactory) -> None:
    log = make_log([(START - 5 * H, 1, [61]), (START - 2 * H, 1, [62]), (START - H, 1, [63])])
    frame = generate_candidates(log, START, END, CandidateConfig(recent_requests=2, popular_items=1))
    recent = frame[frame["source"] == "recent"]
    assert list(recent["item_id"]) == [63, 62]  # newest request first


def test_max_users_keeps_the_most_recently_active(make_log: LogFactory) -> None:
    log = make_log(
        [
            (START - 20 * H, 1, [5]),
            (START - H, 2, [5]),
            (START - 10 * H, 3, [5]),
            (START - 10 * H, 3, [5]),
            (START - 9 * H, 3, [5]),
        ]
    )
    frame = generate_candidates(log, START, END, CandidateConfig(max_users=2))
    assert set(frame["user_id"]) == {2, 3}  # 3: three requests at ~10 h > 1 request at 1 h > 1 at 20 h


def test_empty_window_gives_an_empty_typed_frame(make_log: LogFactory) -> None:
    frame = generate_candidates(make_log(BASE), START - timedelta(hours=48), START, CandidateConfig())
    assert frame.empty and list(frame.columns) == ["user_id", "item_id", "source", "covisit_strength"]
    assert frame["user_id"].dtype == "int64"


def test_bad_interval_and_config_are_refused(make_log: LogFactory) -> None:
    with pytest.raises(ValueError, match="is empty"):
        generate_candidates(make_log(BASE), START, START, CandidateConfig())
    with pytest.raises(ValueError, match="per_user_cap must be positive"):
        CandidateConfig(per_user_cap=0)


def test_covisited_partners_rank_by_count_and_stop_at_top_k(make_log: LogFactory) -> None:
    others = [[10, 20]] * 3 + [[10, 21]] * 2 + [[10, 22]]
    log = make_log([(START - H, 1, [10])] + [(START - 2 * H, 100 + u, c) for u, c in enumerate(others)])
    frame = generate_candidates(log, START, END, CandidateConfig(covisit_top_k=2, popular_items=1))
    covisit = frame[(frame["user_id"] == 1) & (frame["source"] == "covisit")]
    assert list(covisit["item_id"]) == [20, 21]


def test_likely_users_split_among_shards_find_what_one_task_finds(make_log: LogFactory) -> None:
    """The mapped ``candidates`` step: every shard's likely users' pairs, from the stats one task counted and
    staged (through their table), are the pairs of one call over all of them, row for row."""
    rng = np.random.default_rng(3)
    requests = [
        (START - timedelta(minutes=int(m)), int(u), rng.choice(60, size=8, replace=False).tolist())
        for m, u in zip(rng.integers(1, 20 * 60, 400), rng.integers(0, 90, 400), strict=True)
    ]
    log, config = make_log(requests), CandidateConfig(popular_items=5, max_users=70)
    stats = request_stats(log, START, config)
    whole = candidates_of(log, stats, stats.likely_users, START, END, config)
    staged = RequestStats.from_table(stats.to_table())
    parts = []
    for shard in range(3):
        users = UserShard(shard, 3)
        parts.append(
            candidates_of(log, staged, staged.likely_users[users.holds(staged.likely_users)], START, END, config)
        )
    split = pd.concat(parts).sort_values(["user_id", "item_id"], kind="stable").reset_index(drop=True)
    expected = whole.sort_values(["user_id", "item_id"], kind="stable").reset_index(drop=True)
    assert len(stats.likely_users) == 70 and all(len(p) for p in parts)
    pd.testing.assert_frame_equal(split, expected)
