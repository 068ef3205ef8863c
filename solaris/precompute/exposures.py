"""The exposure counters the ranker serves, computed from the event log as of the hour's start.

Every VM reads them (:mod:`solaris.exposure`); training rebuilds the same values with
:meth:`~solaris.models.features.HistoryIndex.served_exposure`, so what a VM learns on is what it is served.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np

from solaris import exposure
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.models.features import MAX_EXACT_ID, US_PER_HOUR, HistoryIndex
from solaris.precompute.embedding import HISTORY_COLUMNS, history_index
from solaris.precompute.run_files import Meta, event_log, timed
from solaris.precompute.spec import HourRun
from solaris.store import open_configured_store
from solaris.store.codec import to_micros
from solaris.store.records import ExposureCounts

LONGEST_H = max(exposure.WINDOWS_H)
WINDOWS = len(exposure.WINDOWS_H)


def exposure_index(log: EventLog, before: datetime, user_ids: np.ndarray | None = None) -> HistoryIndex:
    """Impressions in the longest window plus the counters' TTL before ``before`` (of ``user_ids`` if given)."""
    hours = LONGEST_H + exposure.TTL_HOURS
    if user_ids is not None:
        return history_index(log, user_ids, before, hours)
    return HistoryIndex.from_table(log.impressions(before - timedelta(hours=hours), before, HISTORY_COLUMNS))


def counts_as_of(index: HistoryIndex, at: datetime) -> ExposureCounts:
    """Every user of ``index`` and every pair shown in the longest window, counted before ``at``.

    A user shown nothing in the longest window still gets a row (of zeros): it replaces counts an earlier
    run wrote that would otherwise stay fresh for up to :data:`solaris.exposure.TTL_HOURS`.
    """
    at_us = to_micros(at, "at")
    users = np.unique(index.user)
    user_counts = index.exposure_raw(users, np.zeros_like(users), np.full(len(users), at_us))[:, :WINDOWS]
    keys = np.unique(index.pair_key[index.pair_ts >= at_us - LONGEST_H * US_PER_HOUR])
    pair_users, pair_items = keys // MAX_EXACT_ID, keys % MAX_EXACT_ID
    pair_counts = index.exposure_raw(pair_users, pair_items, np.full(len(keys), at_us))[:, WINDOWS:]
    return ExposureCounts(users, user_counts, pair_users, pair_items, pair_counts)


def exposures(run: HourRun, settings: Settings) -> Meta:
    """The hour's counters to the store, each user's replacing the last, fresh for ``exposure.TTL_HOURS``."""
    with timed({}) as meta, open_configured_store(settings) as store:
        start = run.interval_start
        counts = counts_as_of(exposure_index(event_log(settings), start), start)
        meta["exposure_users_written"] = store.write_exposure_counts(
            run.run_key, counts, start, start + timedelta(hours=exposure.TTL_HOURS)
        )
        meta["exposure_pairs_written"] = len(counts.pair_user_ids)
    return meta
