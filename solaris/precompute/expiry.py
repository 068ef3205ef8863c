"""When a pair's code expires: ``ttl_hours`` after it was written, unless its hour writes more codes than will
expire in the hours before: then the hour's codes are spread over the last ``ttl_jitter_hours + 1`` hours of
their TTL so that the expiring codes stand as level across those hours as they can, the whole TTL first.

Without it, what one heavy hour writes expires together and returns to the FM together, and the FM's calls
come in waves one TTL apart (a soak's day: 42-56k calls every 4th hour against 2-9k between). A fixed phase
per pair flattens them too, but costs wherever codes are rewritten late (the verifier selector rewrites a pair
whenever it ranks again, not when it expires): on the tiny replay, 10% more FM calls and 5.5 points of pair
coverage. Levelling costs only where an hour is heavier than those around it: an hour that writes no more
than what expires gives every code the whole TTL. No code ever lives longer than ``ttl_hours``.

The loads are read from the code log's earlier hours, never the run's own, so a rerun plans the same
expiries; each code's expiry is written beside it in the code log (and per row in the store), and every
reader of freshness takes it from there (:func:`expires_of`).
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from solaris.data.hourly import as_utc
from solaris.precompute.codelog import CodeLog, Codes
from solaris.precompute.spec import EVERY_USER, UserShard
from solaris.store.codec import to_micros

HOUR = timedelta(hours=1)
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def plan_expiry(
    log: CodeLog, written: datetime, user_ids: np.ndarray, item_ids: np.ndarray, ttl_hours: int, jitter_hours: int
) -> np.ndarray:
    """Each code's expiry (datetime64[us]) for the codes written at the hour ``written``."""
    if not 0 <= jitter_hours < ttl_hours:
        raise ValueError(f"jitter_hours must be in 0..ttl_hours - 1 ({ttl_hours - 1}), got {jitter_hours}")
    written = as_utc(written)
    slots = np.array(
        [to_micros(written + (ttl_hours - jitter_hours + k) * HOUR, "slot") for k in range(jitter_hours + 1)]
    )
    expiring = np.zeros(len(slots), np.int64)
    if jitter_hours:
        earlier = log.read(written - (ttl_hours - 1) * HOUR, written, with_codes=False)
        expires = expires_of(earlier, ttl_hours)
        expiring = np.array([(expires == slot).sum() for slot in slots], np.int64)
    take = level(expiring, len(user_ids))
    slot_of = np.repeat(np.arange(len(slots))[::-1], take[::-1])  # the whole TTL first, in pair-hash order
    planned = np.empty(len(user_ids), np.int64)
    planned[np.argsort(pair_hash(user_ids, item_ids), kind="stable")] = slots[slot_of]
    return planned.astype("datetime64[us]")


def level(expiring: np.ndarray, n: int) -> np.ndarray:
    """How many of ``n`` new codes each hour takes so that, with the ``expiring`` codes already due in it, the
    hours end as level as they can: a water level raised over their loads, a remainder to the latest hours."""
    loads = np.asarray(expiring, np.int64).copy()
    take = np.zeros(len(loads), np.int64)
    left = n
    while left > 0:
        low = loads == loads.min()
        higher = loads[~low]
        width = int(low.sum())
        step = int(higher.min() - loads.min()) if len(higher) else left // width + 1
        if step * width <= left:
            take[low] += step
            loads[low] += step
            left -= step * width
            continue
        per, extra = divmod(left, width)
        take[low] += per
        take[np.flatnonzero(low)[::-1][:extra]] += 1
        left = 0
    return take


def expires_of(codes: Codes, ttl_hours: int) -> np.ndarray:
    """Each row's expiry in microseconds; a row logged before expiries were expires ``ttl_hours`` after it."""
    created = codes.created_at.astype("datetime64[us]")
    known = codes.expires_at.astype("datetime64[us]")
    return np.where(np.isnat(known), created + np.timedelta64(ttl_hours, "h"), known).astype(np.int64)


def fresh_codes(
    log: CodeLog, hour: datetime, ttl_hours: int, with_codes: bool = True, users: UserShard = EVERY_USER
) -> Codes:
    """The code log's rows still fresh during the hour starting at ``hour``: written at or before it, expiring
    after it (rows written ``ttl_hours`` or more before it have expired by then); ``with_codes`` and ``users``
    as :meth:`.CodeLog.read` takes them."""
    found = log.read(hour - (ttl_hours - 1) * HOUR, hour + HOUR, with_codes, users)
    keep = expires_of(found, ttl_hours) > to_micros(as_utc(hour), "hour")
    return found.subset(keep)


def pair_hash(user_ids: np.ndarray, item_ids: np.ndarray) -> np.ndarray:
    """splitmix64 of the pair: the same order on every machine and run, unrelated to the ids' order."""
    with np.errstate(over="ignore"):
        x = np.asarray(user_ids).astype(np.uint64) * _MIX[0] ^ np.asarray(item_ids).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        return x ^ (x >> np.uint64(31))
