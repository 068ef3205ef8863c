"""The most of a span the tiers can cover, from the event log alone.

The pair, A2A and aggregate tiers are keyed by the user's own codes, the neighbour tier by the user's
neighbour row, and the run before an hour knows a user only from a request or a sign-up before that hour. An
impression in a user's first hour is therefore out of their reach, whatever the budget: only the new-user
cohort tier, keyed by side features (:mod:`solaris.enrichment.cohorts`), can feed it, and only for the
cohorts and items its grid holds (:func:`cohort_reach`).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.schema import USER_FEATURE_PREFIX
from solaris.enrichment.cohorts import cohort_keys
from solaris.exposure import WINDOWS_H
from solaris.models.features import IdTable
from solaris.models.splits import Span
from solaris.precompute.cohort_codes import largest_cohorts, most_shown
from solaris.precompute.knn_users import SIGNUP_COLUMN, active_users
from solaris.precompute.params import PrecomputeParams

_HOUR_US = 3_600_000_000
HOUR = timedelta(hours=1)


@dataclass(frozen=True)
class CohortReach:
    """A span's impressions, those of users without exposure counters (no impression in the longest counter
    window before the hour: the rows the store gives a cohort code), and of those, per (cohorts, items) grid,
    the ones the cohort step would have fed."""

    impressions: int
    counterless: int
    reached: dict[tuple[int, int], int]

    def share(self, grid: tuple[int, int]) -> float | None:
        return self.reached[grid] / self.impressions if self.impressions else None


def known_user_share(log: EventLog, span: Span) -> float | None:
    """The share of ``span``'s impressions whose user had a request, or signed up, before the impression's
    hour began; None for a span without impressions."""
    shown = log.impressions(span.start, span.end, columns=["ts", "user_id"])
    if not shown.num_rows:
        return None
    return float(known_user_mask(log, shown, span.end).mean())


def known_user_mask(log: EventLog, shown: pa.Table, end: datetime) -> np.ndarray:
    """Per impression of ``shown`` (``ts``, ``user_id``, all before ``end``): whether its user had a request,
    or signed up, before the impression's hour began."""
    requested = log.requests(log.start, end, columns=["ts", "user_id"])
    users, seen = [_ids(requested["user_id"])], [_micros(requested["ts"])]
    signups = log.users()
    if SIGNUP_COLUMN in signups.column_names:
        signed = signups.filter(pc.is_valid(signups[SIGNUP_COLUMN]))
        users.append(_ids(signed["user_id"]))
        seen.append(_micros(signed[SIGNUP_COLUMN]))
    known_users, first_seen = earliest(np.concatenate(users), np.concatenate(seen))
    user = _ids(shown["user_id"])
    if not len(known_users):
        return np.zeros(len(user), bool)
    hour_start = _micros(shown["ts"]) // _HOUR_US * _HOUR_US
    at = np.searchsorted(known_users, user).clip(max=len(known_users) - 1)
    return (known_users[at] == user) & (first_seen[at] < hour_start)


def _ids(column: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(column.to_numpy(), np.int64)


def _micros(ts: pa.ChunkedArray) -> np.ndarray:
    return np.asarray(pc.cast(pc.cast(ts, pa.timestamp("us", tz="UTC")), pa.int64()).to_numpy(), np.int64)


def earliest(ids: np.ndarray, times: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Sorted distinct ids and each one's earliest time."""
    distinct, inverse = np.unique(ids, return_inverse=True)
    first = np.full(len(distinct), np.iinfo(np.int64).max, np.int64)
    np.minimum.at(first, inverse, times)
    return distinct, first


def cohort_reach(log: EventLog, span: Span, grids: Sequence[tuple[int, int]], params: PrecomputeParams) -> CohortReach:
    """The most the new-user cohort tier can feed in ``span`` for each ``(cohorts, cohort_items)`` grid: the
    impressions of counterless users whose side-feature cohort is among the largest of the recent users and
    whose item is among the most shown in the day before, as the hourly cohort step picks them
    (:mod:`solaris.precompute.cohort_codes`), hour by hour."""
    users = IdTable.from_table(log.users(), "user_id", USER_FEATURE_PREFIX)
    shown_total, counterless, reached = 0, 0, dict.fromkeys(grids, 0)
    hour = span.start
    while hour < span.end:
        shown = log.impressions(hour, hour + HOUR, ["user_id", "item_id"])
        user, item = shown["user_id"].to_numpy(), shown["item_id"].to_numpy()
        counted = log.impressions(hour - max(WINDOWS_H) * HOUR, hour, ["user_id"])["user_id"].to_numpy()
        new = ~np.isin(user, counted)
        recent = active_users(log, hour, params.knn_lookback_hours)
        recent_keys, keys = (cohort_keys(users.features[users.rows(ids)]) for ids in (recent, user))
        for c, k in grids:
            top = largest_cohorts(recent_keys, recent, c)[0]
            top_items = most_shown(log, hour, params.window_hours, k)
            reached[(c, k)] += int((new & np.isin(keys, top) & np.isin(item, top_items)).sum())
        shown_total, counterless = shown_total + len(user), counterless + int(new.sum())
        hour += HOUR
    return CohortReach(shown_total, counterless, reached)
