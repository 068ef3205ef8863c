"""When a pair's code expires (solaris.precompute.expiry): on its phase, never past the TTL, the whole TTL once it
is rewritten on its phase; the waves of FM calls flatten; and every reader of freshness follows the same rule."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pytest
from precompute_logs import T0, build_log

from solaris.precompute import quality
from solaris.precompute.codelog import CodeLog
from solaris.precompute.expiry import expiry_hours, expiry_micros, fresh_codes, hour_index, phases
from solaris.precompute.params import PrecomputeParams

H = timedelta(hours=1)
RNG = np.random.default_rng(0)
USERS, ITEMS = RNG.integers(0, 2**40, 20_000), RNG.integers(0, 2**40, 20_000)


@pytest.mark.parametrize(("ttl", "jitter"), [(4, 0), (4, 1), (4, 3), (6, 2), (1, 0)])
def test_a_code_expires_on_its_phase_within_the_last_hours_of_its_ttl(ttl: int, jitter: int) -> None:
    created = RNG.integers(490_000, 500_000, len(USERS))

    expires = expiry_hours(USERS, ITEMS, created, ttl, jitter)

    life = expires - created
    assert life.min() >= ttl - jitter and life.max() <= ttl  # never past the TTL, at least an hour
    assert ((expires + phases(USERS, ITEMS, jitter)) % (jitter + 1) == 0).all()  # the pair's own phase
    if jitter:  # the phases are spread evenly
        shares = np.bincount(phases(USERS, ITEMS, jitter)) / len(USERS)
        assert np.abs(shares - 1 / (jitter + 1)).max() < 0.02


def test_a_pair_rewritten_when_it_expires_lives_the_whole_ttl() -> None:
    first = expiry_hours(USERS, ITEMS, np.full(len(USERS), 500_000), 4, 3)

    again = expiry_hours(USERS, ITEMS, first, 4, 3)

    assert (again - first == 4).all()


@pytest.mark.parametrize(("jitter", "flat"), [(0, False), (3, True)])
def test_pairs_always_wanted_call_the_fm_in_waves_without_a_spread_and_flat_with_it(jitter: int, flat: bool) -> None:
    """Every pair is wanted every hour and first written at hour 0: each hour the FM embeds the pairs whose
    code has expired, as the precompute does (the still-fresh are dropped)."""
    expires = np.zeros(len(USERS), np.int64)
    calls = []
    for hour in range(48):
        due = expires <= hour
        calls.append(int(due.sum()))
        expires[due] = expiry_hours(USERS[due], ITEMS[due], np.full(int(due.sum()), hour), 4, jitter)
    later = np.array(calls[4:])  # after the first cycle

    assert bool(later.max() / later.mean() <= 1.1) == flat, later.tolist()
    # The spread costs at most one extra write a pair over the two days: the first codes' shorter lives.
    assert len(USERS) * 12 <= sum(calls) <= len(USERS) * 13
    if not jitter:
        assert later.max() / later.mean() == pytest.approx(4.0)  # one wave every fourth hour


def test_the_fresh_codes_of_an_hour_follow_each_pairs_expiry(tmp_path: Path) -> None:
    codes = CodeLog(tmp_path / "codes", "fm1-ae1-d2", 2)
    users, items = np.arange(400), np.arange(400) + 7
    for back in range(5):
        at = T0 - back * H
        codes.write_hour(at, users, items, np.ones(400), np.ones((400, 2), np.float32))
    read = codes.read(T0 - 4 * H, T0 + H)
    expires = expiry_micros(read.user_ids, read.item_ids, read.created_at, 4, 3)
    hour_start = hour_index(T0) * 3_600_000_000

    fresh = fresh_codes(codes, T0, 4, 3)

    expected = (expires > hour_start) & (read.created_at.astype(np.int64) <= hour_start)
    assert len(fresh.user_ids) == int(expected.sum()) > 0
    assert fresh_codes(codes, T0, 4, 0).created_at.min() == np.datetime64((T0 - 3 * H).replace(tzinfo=None), "us")


def test_hit_while_fresh_counts_a_request_only_before_the_pairs_own_expiry(tmp_path: Path) -> None:
    written = T0 - 4 * H
    users = np.arange(200)
    items = users + 1000
    expires = expiry_hours(users, items, np.full(200, hour_index(written)), 4, 3) - hour_index(written)
    late = users[expires == 2][0]  # its code lived 2 h: a request in the 3rd hour is past it
    kept = users[expires == 4][0]
    log = build_log(
        tmp_path / "log", [(written + 2 * H + timedelta(minutes=5), int(u), [int(u) + 1000]) for u in (late, kept)]
    )
    codes = CodeLog(tmp_path / "codes", "fm1-ae1-d2", 2)
    codes.write_hour(written, users, items, np.ones(200), np.ones((200, 2), np.float32))

    spread = quality.hit_rate_ttl(log, codes, T0, 4, 3)
    whole = quality.hit_rate_ttl(log, codes, T0, 4, 0)

    assert (spread["ttl_pairs"], spread["ttl_hits"]) == (200, 1)  # the pair still fresh only
    assert whole["ttl_hits"] == 2


def test_the_spread_applies_below_the_ttl() -> None:
    assert PrecomputeParams().expiry_jitter_hours == 3
    assert PrecomputeParams(ttl_hours=2).expiry_jitter_hours == 1
    assert PrecomputeParams(ttl_jitter_hours=0).expiry_jitter_hours == 0
    with pytest.raises(ValueError, match="ttl_jitter_hours"):
        PrecomputeParams(ttl_jitter_hours=-1)
    with pytest.raises(ValueError, match=r"jitter_hours must be in 0..ttl_hours - 1 \(3\)"):
        expiry_hours(USERS, ITEMS, np.zeros(len(USERS), np.int64), 4, 4)
