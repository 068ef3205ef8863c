"""The exposure counters the ranker serves, computed from the event log as of the hour's start.

Every VM reads them (:mod:`solaris.exposure`); training rebuilds the same values with
:meth:`~solaris.models.features.HistoryIndex.served_exposure`, so what a VM learns on is what it is served.
Each user shard counts its own users' impressions (``count_exposures``); one task writes the shards' counters
to the store a shard at a time (``exposures``), since the store's writers run one at a time.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa

from solaris import exposure
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.models.features import MAX_EXACT_ID, US_PER_HOUR, HistoryIndex
from solaris.precompute.embedding import HISTORY_COLUMNS, history_index
from solaris.precompute.pipeline import EXPOSURE_PAIRS, EXPOSURE_USERS, USER_SHARDS
from solaris.precompute.run_files import Meta, event_log, shard_count, step_staging, timed
from solaris.precompute.spec import HourRun, UserShard
from solaris.store import open_configured_store
from solaris.store.codec import to_micros
from solaris.store.records import ExposureCounts

LONGEST_H = max(exposure.WINDOWS_H)
WINDOWS = len(exposure.WINDOWS_H)
# What the counters are counted from: the longest window plus the counters' TTL.
INDEX_HOURS = LONGEST_H + exposure.TTL_HOURS
COUNT_COLUMNS = [f"count_{h}h" for h in exposure.WINDOWS_H]


def exposure_index(log: EventLog, before: datetime, user_ids: np.ndarray | None = None) -> HistoryIndex:
    """Impressions in the longest window plus the counters' TTL before ``before`` (of ``user_ids`` if given)."""
    if user_ids is not None:
        return history_index(log, user_ids, before, INDEX_HOURS)
    return HistoryIndex.from_table(log.impressions(before - timedelta(hours=INDEX_HOURS), before, HISTORY_COLUMNS))


def shown_users(log: EventLog, before: datetime, users: UserShard) -> np.ndarray:
    """The ids of ``users`` shown anything in the index's hours before ``before``, read a user column an hour."""
    hours = log.iter_impressions(before - timedelta(hours=INDEX_HOURS), before, ["user_id"])
    found = [np.unique(table["user_id"].to_numpy().astype(np.int64)) for _, table in hours]
    ids = np.unique(np.concatenate(found)) if found else np.empty(0, np.int64)
    return ids[users.holds(ids)]


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


def count_tables(counts: ExposureCounts) -> tuple[pa.Table, pa.Table]:
    """The counters as the staged tables (per user, per pair), a column a window."""
    users = {"user_id": counts.user_ids} | dict(zip(COUNT_COLUMNS, counts.user_counts.T, strict=True))
    pairs = {"user_id": counts.pair_user_ids, "item_id": counts.pair_item_ids}
    pairs |= dict(zip(COUNT_COLUMNS, counts.pair_counts.T, strict=True))
    return pa.table(users), pa.table(pairs)


def counts_of(users: pa.Table, pairs: pa.Table) -> ExposureCounts:
    """:func:`count_tables` read back."""

    def matrix(table: pa.Table) -> np.ndarray:
        return np.stack([table[c].to_numpy() for c in COUNT_COLUMNS], axis=1).reshape(table.num_rows, WINDOWS)

    return ExposureCounts(
        users["user_id"].to_numpy(),
        matrix(users),
        pairs["user_id"].to_numpy(),
        pairs["item_id"].to_numpy(),
        matrix(pairs),
    )


def count_exposures(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The counters of the shard's users as of the hour's start, from their impressions only."""
    users = UserShard(shard, shard_count(run, USER_SHARDS))
    with timed({"shard": shard}) as meta:
        log, start = event_log(settings), run.interval_start
        shown = None if users.every_user else shown_users(log, start, users)
        per_user, per_pair = count_tables(counts_as_of(exposure_index(log, start, shown), start))
        stage = step_staging(settings, run, "count_exposures")
        meta["rows"] = stage.write(EXPOSURE_USERS, per_user, shard)["rows"]
        stage.write(EXPOSURE_PAIRS, per_pair, shard)
    return meta


def exposures(run: HourRun, settings: Settings) -> Meta:
    """The hour's counters to the store a shard at a time, each user's replacing the last, fresh for
    ``exposure.TTL_HOURS``. A rerun writes every shard again; a user's counters are as of the hour's start,
    whichever attempt wrote them."""
    with timed({}) as meta, open_configured_store(settings) as store:
        stage = step_staging(settings, run, "exposures")
        start = run.interval_start
        meta |= {"exposure_users_written": 0, "exposure_pairs_written": 0}
        for shard in range(shard_count(run, USER_SHARDS)):
            counts = counts_of(stage.read(EXPOSURE_USERS, shard), stage.read(EXPOSURE_PAIRS, shard))
            expires = start + timedelta(hours=exposure.TTL_HOURS)
            meta["exposure_users_written"] += store.write_exposure_counts(run.run_key, counts, start, expires)
            meta["exposure_pairs_written"] += len(counts.pair_user_ids)
    return meta
