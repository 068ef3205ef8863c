"""When a pair's code expires: at most ``ttl_hours`` after it was written, on an hour of the pair's own phase.

Without a spread, everything one run writes expires together and comes back to the FM together, so the FM's
calls come in waves one TTL apart (a soak's day: 42-56k calls every 4th hour against 2-9k between). Each pair
instead has a phase, a stable hash of (user, item) modulo ``ttl_jitter_hours + 1``, and its code expires at the
last hour of its phase within ``[created + ttl_hours - ttl_jitter_hours, created + ttl_hours]``. A first write
lives ``ttl_hours - phase offset`` hours; a pair written again when it expires lands on its phase, and where
``ttl_jitter_hours + 1`` divides ``ttl_hours`` (the default 3 with a TTL of 4) lives the whole TTL from then on.
So the phases spread the waves across the TTL and, once the first cycle has passed, cost no extra calls.

Every reader of freshness asks here (the store write, the code log's readers, the quality figures, the soak's
check), so the rule is written once. Hours are whole: every precompute writes on an hour boundary.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from solaris.data.hourly import as_utc
from solaris.precompute.codelog import CodeLog, Codes

MICROS_PER_HOUR = 3_600_000_000
_MIX = (np.uint64(0x9E3779B97F4A7C15), np.uint64(0xBF58476D1CE4E5B9), np.uint64(0x94D049BB133111EB))


def phases(user_ids: np.ndarray, item_ids: np.ndarray, jitter_hours: int) -> np.ndarray:
    """Each pair's phase in ``0..jitter_hours``: splitmix64 of the pair, the same on every machine and run."""
    if jitter_hours == 0:
        return np.zeros(len(user_ids), np.int64)
    with np.errstate(over="ignore"):
        x = np.asarray(user_ids).astype(np.uint64) * _MIX[0] ^ np.asarray(item_ids).astype(np.uint64)
        x = (x ^ (x >> np.uint64(30))) * _MIX[1]
        x = (x ^ (x >> np.uint64(27))) * _MIX[2]
        x ^= x >> np.uint64(31)
    return (x % np.uint64(jitter_hours + 1)).astype(np.int64)


def expiry_hours(
    user_ids: np.ndarray, item_ids: np.ndarray, created_hours: np.ndarray, ttl_hours: int, jitter_hours: int
) -> np.ndarray:
    """The hour (since the epoch) each code expires, from the hour it was written."""
    if not 0 <= jitter_hours < ttl_hours:
        raise ValueError(f"jitter_hours must be in 0..ttl_hours - 1 ({ttl_hours - 1}), got {jitter_hours}")
    latest = np.asarray(created_hours, np.int64) + ttl_hours
    return latest - (latest + phases(user_ids, item_ids, jitter_hours)) % (jitter_hours + 1)


def expiry_micros(
    user_ids: np.ndarray, item_ids: np.ndarray, created: np.ndarray, ttl_hours: int, jitter_hours: int
) -> np.ndarray:
    """:func:`expiry_hours` of codes written at ``created`` (datetime64[us] or microseconds), in microseconds."""
    return expiry_hours(user_ids, item_ids, _hours(created), ttl_hours, jitter_hours) * MICROS_PER_HOUR


def hour_index(t: datetime) -> int:
    return int(np.datetime64(as_utc(t).replace(tzinfo=None), "us").astype(np.int64)) // MICROS_PER_HOUR


def fresh_codes(log: CodeLog, hour: datetime, ttl_hours: int, jitter_hours: int) -> Codes:
    """The code log's rows still fresh during the hour starting at ``hour``: written at or before it, expiring
    after it (rows older than ``ttl_hours - 1`` hours before it have expired by then, whatever their phase)."""
    found = log.read(hour - timedelta(hours=ttl_hours - 1), hour + timedelta(hours=1))
    expires = expiry_hours(found.user_ids, found.item_ids, _hours(found.created_at), ttl_hours, jitter_hours)
    keep = expires > hour_index(hour)
    return Codes(*(getattr(found, f)[keep] for f in ("user_ids", "item_ids", "scores", "codes", "created_at")))


def _hours(created: np.ndarray) -> np.ndarray:
    return np.asarray(created).astype("datetime64[us]").astype(np.int64) // MICROS_PER_HOUR
