"""The most of a span any user-keyed tier can cover: impressions of users the hourly run could know.

The pair, A2A and aggregate tiers are keyed by the user's own codes, the neighbour tier by the user's
neighbour row, and the run before an hour knows a user only from a request or a sign-up before that hour. An
impression in a user's first hour is therefore out of their reach, whatever the budget: only the new-user
cohort tier, keyed by side features (:mod:`solaris.enrichment.cohorts`), can feed it.
"""

from __future__ import annotations

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.models.splits import Span
from solaris.precompute.knn_users import SIGNUP_COLUMN

_HOUR_US = 3_600_000_000


def known_user_share(log: EventLog, span: Span) -> float | None:
    """The share of ``span``'s impressions whose user had a request, or signed up, before the impression's
    hour began; None for a span without impressions."""
    shown = log.impressions(span.start, span.end, columns=["ts", "user_id"])
    if not shown.num_rows:
        return None
    requested = log.requests(log.start, span.end, columns=["ts", "user_id"])
    users, seen = [_ids(requested["user_id"])], [_micros(requested["ts"])]
    signups = log.users()
    if SIGNUP_COLUMN in signups.column_names:
        signed = signups.filter(pc.is_valid(signups[SIGNUP_COLUMN]))
        users.append(_ids(signed["user_id"]))
        seen.append(_micros(signed[SIGNUP_COLUMN]))
    known_users, first_seen = _earliest(np.concatenate(users), np.concatenate(seen))
    user = _ids(shown["user_id"])
    hour_start = _micros(shown["ts"]) // _HOUR_US * _HOUR_US
    at = np.searchsorted(known_users, user).clip(max=len(known_users) - 1)
    return float(((known_users[at] == user) & (first_seen[at] < hour_start)).mean())


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), np.int64)


def _micros(ts: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.cast(pc.cast(ts, pa.timestamp("us", tz="UTC")), pa.int64()).to_numpy(), np.int64)


def _earliest(users: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct users and each one's earliest time."""
    distinct, inverse = np.unique(users, return_inverse=True)
    earliest = np.full(len(distinct), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(earliest, inverse, times)
    return distinct, earliest
