from __future__ import annotations

import math
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pytest
from precompute_logs import T0, LogFactory

from solaris.precompute.fm_pool import REQUEUE, add_requeued, drop_still_fresh, requeue_misses
from solaris.precompute.verifier import select_top_fraction, selection_budget

START = T0 + timedelta(hours=24)


def scored_pairs(n_users: int, per_user: int, seed: int) -> pd.DataFrame:
    rng = np.random.default_rng(seed)
    return pd.DataFrame(
        {
            "user_id": np.repeat(np.arange(n_users), per_user),
            "item_id": np.tile(np.arange(per_user), n_users),
            # Rounded so that ties occur and tie-breaking is exercised.
            "score": rng.random(n_users * per_user).round(2),
        }
    )


def greedy_reference(scored: pd.DataFrame, budget: int, cap: int) -> set[tuple[int, int]]:
    """Walk pairs best first (ties: lower user, lower item) and take each unless its user is full."""
    rows = sorted(zip(-scored["score"], scored["user_id"], scored["item_id"], strict=True))
    taken: set[tuple[int, int]] = set()
    per_user: dict[int, int] = {}
    for _, user, item in rows:
        if len(taken) == budget:
            break
        if per_user.get(user, 0) < cap:
            taken.add((user, item))
            per_user[user] = per_user.get(user, 0) + 1
    return taken


def as_pairs(frame: pd.DataFrame) -> set[tuple[int, int]]:
    return set(zip(frame["user_id"], frame["item_id"], strict=True))


@pytest.mark.parametrize(
    ("n", "fraction", "expected"), [(10, 0.2, 2), (11, 0.2, 3), (10, 0.7, 7), (1, 0.2, 1), (0, 0.2, 0)]
)
def test_budget_is_the_ceiling_without_float_noise(n: int, fraction: float, expected: int) -> None:
    assert selection_budget(n, fraction) == expected


@pytest.mark.parametrize(
    ("fraction", "cap", "message"),
    [(0.0, 5, "top_fraction"), (1.5, 5, "top_fraction"), (0.2, 0, "per_user_cap")],
)
def test_bad_fraction_or_cap_is_refused(fraction: float, cap: int, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        select_top_fraction(scored_pairs(2, 2, seed=0), top_fraction=fraction, per_user_cap=cap)


@pytest.mark.parametrize("seed", range(3))
def test_selection_takes_the_best_ceil_fraction_within_the_cap(seed: int) -> None:
    scored = scored_pairs(n_users=40, per_user=25, seed=seed)
    chosen = select_top_fraction(scored, top_fraction=0.2, per_user_cap=6)
    assert len(chosen) == math.ceil(0.2 * len(scored))
    assert chosen.groupby("user_id").size().max() <= 6
    assert as_pairs(chosen) == greedy_reference(scored, len(chosen), cap=6)
    assert not chosen["forced"].any()


def test_cap_can_leave_fewer_pairs_than_the_budget() -> None:
    scored = scored_pairs(n_users=2, per_user=50, seed=0)
    chosen = select_top_fraction(scored, top_fraction=0.5, per_user_cap=10)
    assert len(chosen) == 20


def test_ties_are_broken_by_user_then_item() -> None:
    scored = pd.DataFrame({"user_id": [3, 1, 2, 1], "item_id": [0, 9, 5, 4], "score": [0.5] * 4})
    chosen = select_top_fraction(scored, top_fraction=0.5, per_user_cap=None)
    assert as_pairs(chosen) == {(1, 4), (1, 9)}


def test_forced_pairs_are_added_outside_budget_and_cap() -> None:
    scored = scored_pairs(n_users=5, per_user=10, seed=1).assign(source="recent")
    # User 0's four worst pairs: more than the cap, and never chosen on merit.
    worst = scored[scored["user_id"] == 0].nsmallest(4, "score").index
    scored.loc[worst, "source"] = REQUEUE
    chosen = select_top_fraction(scored, top_fraction=0.2, per_user_cap=3)
    forced = chosen[chosen["forced"]]
    assert as_pairs(forced) == as_pairs(scored.loc[worst]) and (forced["source"] == REQUEUE).all()
    speculative = chosen[~chosen["forced"]]
    remaining = scored.drop(index=worst)
    assert len(speculative) == selection_budget(len(remaining), 0.2) == 10
    assert as_pairs(speculative) == greedy_reference(remaining, 10, cap=3)
    assert chosen["forced"].tolist() == [True] * 4 + [False] * 10  # forced first


def test_add_requeued_labels_overlaps_requeue_and_keeps_each_pair_once() -> None:
    sources = pd.Categorical(["recent", "covisit", "popular"])
    candidates = pd.DataFrame(
        {"user_id": [1, 1, 2], "item_id": [10, 11, 10], "source": sources, "covisit_strength": [4, 7, 0]}
    )
    requeued = pd.DataFrame({"user_id": [1, 3], "item_id": [11, 30], "source": [REQUEUE] * 2})
    pool = add_requeued(candidates, requeued)
    rows = zip(pool["user_id"], pool["item_id"], pool["source"], pool["covisit_strength"], strict=True)
    assert {(u, i): (s, c) for u, i, s, c in rows} == {
        (1, 10): ("recent", 4),
        (1, 11): (REQUEUE, 7),  # forced, with the candidate's co-visit strength
        (2, 10): ("popular", 0),
        (3, 30): (REQUEUE, 0),  # not a candidate: no co-visit strength
    }
    assert len(pool) == 4


def test_repeated_pairs_are_refused() -> None:
    scored = pd.DataFrame({"user_id": [1, 2, 1], "item_id": [5, 5, 5], "score": [0.1, 0.2, 0.3]})
    with pytest.raises(ValueError, match=r"row 2 repeats pair \(user 1, item 5\)"):
        select_top_fraction(scored, 0.2, 50)


def test_non_finite_scores_are_refused_with_the_row() -> None:
    scored = pd.DataFrame({"user_id": [1, 2], "item_id": [1, 2], "score": [0.3, np.nan]})
    with pytest.raises(ValueError, match=r"row 1 \(user 2, item 2\)"):
        select_top_fraction(scored, 0.2, 50)


class FreshStub:
    """The store's fresh_pairs with a fixed set of fresh pairs; records the times it was asked about."""

    def __init__(self, fresh: set[tuple[int, int]]) -> None:
        self.fresh = fresh
        self.asked: list[datetime] = []

    def __call__(self, users: np.ndarray, items: np.ndarray, t: datetime) -> np.ndarray:
        self.asked.append(t)
        return np.array([(u, i) in self.fresh for u, i in zip(users, items, strict=True)], dtype=bool)


def test_requeue_takes_last_hours_requested_pairs_that_are_not_fresh(make_log: LogFactory) -> None:
    log = make_log(
        [
            (START - timedelta(hours=2), 1, [1, 2]),  # before the last hour
            (START - timedelta(minutes=50), 2, [3, 4]),
            (START - timedelta(minutes=5), 2, [4, 5]),
            (START, 3, [6]),  # the interval being prepared: not yet seen
        ]
    )
    fresh = FreshStub({(2, 4)})
    queued = requeue_misses(log, START, fresh)
    assert fresh.asked == [START]
    assert as_pairs(queued) == {(2, 3), (2, 5)}
    assert len(queued) == 2 and (queued["source"] == REQUEUE).all()


def test_drop_still_fresh_checks_at_until() -> None:
    pairs = pd.DataFrame({"user_id": [1, 1, 2], "item_id": [1, 2, 1], "source": ["recent"] * 3})
    fresh = FreshStub({(1, 2)})
    until = START + timedelta(hours=2)
    kept = drop_still_fresh(pairs, fresh, until)
    assert fresh.asked == [until]
    assert as_pairs(kept) == {(1, 1), (2, 1)} and list(kept.columns) == list(pairs.columns)


def test_a_malformed_fresh_mask_is_refused() -> None:
    pairs = pd.DataFrame({"user_id": [1, 2], "item_id": [1, 2]})
    with pytest.raises(ValueError, match=r"bool array of shape \(2,\)"):
        drop_still_fresh(pairs, lambda u, i, t: np.zeros(3, bool), START)


def test_nothing_to_check_makes_no_store_call(make_log: LogFactory) -> None:
    fresh = FreshStub(set())
    empty = pd.DataFrame({"user_id": pd.Series(dtype="int64"), "item_id": pd.Series(dtype="int64")})
    assert drop_still_fresh(empty, fresh, START).empty
    log = make_log([(START - timedelta(hours=3), 1, [1])])
    queued = requeue_misses(log, START, fresh)
    assert queued.empty and list(queued.columns) == ["user_id", "item_id", "source"]
    assert fresh.asked == []


def select_over_shards(scored: pd.DataFrame, shards: int, rank, quota_of) -> pd.DataFrame:  # type: ignore[no-untyped-def]
    """What the run's score, cut and select steps do: rank each user shard, cut over the shards' heads, take."""
    from solaris.precompute.selection import ELIGIBLE, FORCED, RANK_CLASS, cut_of, eligible_head, take
    from solaris.precompute.spec import shard_of

    owner = shard_of(scored["user_id"].to_numpy(), shards)
    rankings = [rank(scored[owner == s].reset_index(drop=True)) for s in range(shards)]
    speculative = sum(int((r[RANK_CLASS] != FORCED).sum()) for r in rankings)
    quota = quota_of(speculative)
    eligible = sum(int((r[RANK_CLASS] == ELIGIBLE).sum()) for r in rankings)
    cut = cut_of([eligible_head(r).head(quota) for r in rankings], quota, eligible)
    return pd.concat([take(r, cut) for r in rankings], ignore_index=True)


@pytest.mark.parametrize("shards", [2, 3, 7])
@pytest.mark.parametrize("seed", range(3))
def test_the_budget_is_exact_across_user_shards(shards: int, seed: int) -> None:
    """Each shard takes its pairs up to the cut found over every shard's head: the pairs one task would take,
    never one more than the budget, ties (scores rounded to 2 places) included."""
    from solaris.precompute.budget import rank_by_value, select_within_budget

    scored = scored_pairs(n_users=60, per_user=30, seed=seed)
    scored["demand"] = np.random.default_rng(seed + 10).random(len(scored))
    for budget, floor in ((1, 0.0), (97, 0.0), (400, 0.3), (5000, 0.0)):
        whole = select_within_budget(scored, budget, floor)
        sharded = select_over_shards(scored, shards, lambda r: rank_by_value(r, floor), lambda _: budget)
        assert len(sharded) == len(whole) <= budget
        assert as_pairs(sharded) == as_pairs(whole)


@pytest.mark.parametrize("shards", [2, 5])
def test_the_verifier_takes_the_same_pairs_across_user_shards(shards: int) -> None:
    """Its quota is a share of every shard's speculative pairs, re-queued misses are forced, the cap is per user."""
    from solaris.precompute.verifier import rank_top_fraction, selection_budget

    scored = scored_pairs(n_users=50, per_user=20, seed=4)
    scored["source"] = np.where(np.random.default_rng(5).random(len(scored)) < 0.1, REQUEUE, "recent")
    whole = select_top_fraction(scored, top_fraction=0.2, per_user_cap=3)
    sharded = select_over_shards(
        scored, shards, lambda r: rank_top_fraction(r, 3), lambda speculative: selection_budget(speculative, 0.2)
    )
    assert whole["forced"].any() and len(sharded) == len(whole)
    assert as_pairs(sharded) == as_pairs(whole)
    assert as_pairs(sharded[sharded["forced"]]) == as_pairs(whole[whole["forced"]])
