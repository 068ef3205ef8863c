"""When a code expires (solaris.precompute.expiry): the whole TTL unless its hour is heavier than those before
it, never past the TTL, planned the same on a rerun; the waves of FM calls flatten at no cost where rewrites come
late; and every reader of freshness takes each code's own expiry from the code log."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from precompute_logs import T0, build_log

from solaris.precompute import quality
from solaris.precompute.codelog import CodeLog
from solaris.precompute.expiry import expires_of, fresh_codes, level, plan_expiry

H = timedelta(hours=1)
DIM = 2


def _log(tmp_path: Path) -> CodeLog:
    return CodeLog(tmp_path / "codes", "fm1-ae1-d2", DIM)


def _write(log: CodeLog, at: datetime, users: np.ndarray, ttl: int = 4, jitter: int = 3) -> np.ndarray:
    """Plan and log one hour's codes of ``users`` (item = user + 1000), as write_pairs does."""
    items = users + 1000
    expires = plan_expiry(log, at, users, items, ttl, jitter)
    log.write_hour(at, users, items, np.ones(len(users)), np.ones((len(users), DIM), np.float32), expires)
    return expires


def _lives(expires: np.ndarray, at: datetime) -> np.ndarray:
    return (expires - np.datetime64(at.replace(tzinfo=None), "us")) // np.timedelta64(1, "h")


@pytest.mark.parametrize(
    ("expiring", "n", "taken"),
    [
        ([0, 0, 0, 0], 400, [100, 100, 100, 100]),  # a first hour: spread evenly
        ([120, 120, 120, 0], 30, [0, 0, 0, 30]),  # no heavier than what expires: the whole TTL
        ([5, 3, 8, 0], 10, [1, 3, 0, 6]),  # levelled: 6, 6, 8, 6
        ([0, 0, 0, 0], 3, [0, 1, 1, 1]),  # a remainder goes to the latest hours
        ([7, 7, 7, 0], 0, [0, 0, 0, 0]),
    ],
)
def test_level_raises_a_water_level_over_the_hours_loads(expiring: list[int], n: int, taken: list[int]) -> None:
    assert level(np.array(expiring), n).tolist() == taken


def test_a_first_hour_is_spread_and_an_hour_like_the_ones_before_lives_the_whole_ttl(tmp_path: Path) -> None:
    log = _log(tmp_path)

    first = _lives(_write(log, T0, np.arange(4000)), T0)
    second = _lives(_write(log, T0 + H, np.arange(4000, 5000)), T0 + H)

    assert np.bincount(first).tolist() == [0, 1000, 1000, 1000, 1000]  # 1 to 4 hours, none past the TTL
    assert (second == 4).all()  # 1,000 expire in each hour before: none needs to move
    assert (_lives(_write(log, T0 + 2 * H, np.arange(5000, 5100), jitter=0), T0 + 2 * H) == 4).all()


def test_a_rerun_plans_the_same_expiries(tmp_path: Path) -> None:
    log = _log(tmp_path)
    _write(log, T0, np.arange(3000))
    users = np.arange(3000, 9000)

    planned = _write(log, T0 + H, users)
    again = _write(log, T0 + H, users)  # its own hour's codes are in the log now: not read as load

    assert (planned == again).all() and len(np.unique(planned)) > 1


@pytest.mark.parametrize(("jitter", "flat"), [(0, False), (3, True)])
def test_the_same_pairs_wanted_every_hour_call_the_fm_in_waves_without_levelling(
    tmp_path: Path, jitter: int, flat: bool
) -> None:
    """Every pair is wanted every hour and first written at once; each hour the FM embeds those whose code has
    expired (the still fresh are dropped), as the precompute does."""
    log, users = _log(tmp_path / str(jitter)), np.arange(8000)
    expires = np.full(len(users), np.datetime64("1970-01-01", "us"))
    calls = []
    for hour in range(24):
        at = T0 + hour * H
        due = expires <= np.datetime64(at.replace(tzinfo=None), "us")
        calls.append(int(due.sum()))
        expires[due] = _write(log, at, users[due], jitter=jitter)
    later = np.array(calls[4:])

    assert bool(later.max() / later.mean() <= 1.05) == flat, calls
    assert sum(calls) <= len(users) * 7  # levelling costs the first codes' shorter lives, no more


def test_late_rewrites_keep_the_whole_ttl(tmp_path: Path) -> None:
    """Pairs rewritten whenever they rank again, not when they expire (the verifier): a steady hour is no heavier
    than what expires before it, so its codes live the whole TTL, as without levelling."""
    log, rng = _log(tmp_path), np.random.default_rng(0)
    for hour in range(12):
        users = rng.choice(50_000, 2000, replace=False) + hour * 50_000
        lives = _lives(_write(log, T0 + hour * H, users), T0 + hour * H)
    assert np.mean(lives == 4) > 0.95


def test_fresh_codes_and_hit_while_fresh_take_each_codes_own_expiry(tmp_path: Path) -> None:
    log = _log(tmp_path)
    users = np.arange(400)
    expires = _write(log, T0, users)
    lives = _lives(expires, T0)
    short, whole = users[lives == 2][0], users[lives == 4][0]
    events = build_log(
        tmp_path / "log", [(T0 + 2 * H + timedelta(minutes=5), int(u), [int(u) + 1000]) for u in (short, whole)]
    )

    fresh_at_2 = fresh_codes(log, T0 + 2 * H, 4)
    judged = quality.hit_rate_ttl(events, log, T0 + 4 * H, 4)

    assert sorted(fresh_at_2.user_ids.tolist()) == sorted(users[lives > 2].tolist())
    assert (judged["ttl_pairs"], judged["ttl_hits"]) == (400, 1)  # the short-lived code had expired by then


def test_an_hour_logged_before_expiries_expires_a_ttl_after_it(tmp_path: Path) -> None:
    log = _log(tmp_path)
    log.write_hour(
        T0,
        np.arange(3),
        np.arange(3),
        np.ones(3),
        np.ones((3, DIM), np.float32),
        np.full(3, np.datetime64("NaT"), "datetime64[us]"),
    )

    found = expires_of(log.read(T0, T0 + H), 4)

    assert (found == int((T0 + 4 * H).timestamp()) * 1_000_000).all() and T0.tzinfo is UTC


def test_the_jitter_must_leave_a_code_an_hour(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match=r"jitter_hours must be in 0..ttl_hours - 1 \(3\)"):
        plan_expiry(_log(tmp_path), T0, np.arange(3), np.arange(3), 4, 4)
