"""The cohort step: each hour, the code a new user of each recent side-feature cohort gets for the items
most shown (:mod:`solaris.enrichment.cohorts`), written as its prototype user's pair codes for this hour.

The FM sees the hour of day, so a code serves the hour it was made for: it expires at the hour's end.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow.compute as pc

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.enrichment.cohorts import user_cohorts
from solaris.precompute import knn_users
from solaris.precompute.run_files import DEGENERATE, Meta, event_log, timed
from solaris.precompute.spec import HourRun
from solaris.store import open_configured_store
from solaris.store.cohorts import prototype_ids
from solaris.store.validate import finite_rows


def cohorts(run: HourRun, settings: Settings) -> Meta:
    """New-user codes of the ``cohorts`` largest cohorts among the recent users (requests or sign-ups in the
    KNN's lookback) for the ``cohort_items`` items most shown in the aggregate window; FM calls outside the
    budget, counted as ``cohort_codes_written``. A code the store would refuse (non-finite as stored) is left
    out and counted: its cohort is served by the other tiers for that item this hour."""
    from solaris.models.autoencoder import Autoencoder
    from solaris.models.features import HistoryIndex
    from solaris.precompute.embedding import embed_codes, history_table
    from solaris.precompute.similarity_nodes import pinned_fm
    from solaris.tracking import registry

    p, start = run.params, run.interval_start
    with timed({"cohort_codes_written": 0, DEGENERATE["cohort"]: 0}) as meta:
        log = event_log(settings)
        items = most_shown(log, start, p.window_hours, p.cohort_items)
        recent = knn_users.active_users(log, start, p.knn_lookback_hours)
        if not (p.cohorts and len(items) and len(recent)):
            return meta
        fm = pinned_fm(run, settings)
        ae = registry.load_ae(run.ae_version)
        if not isinstance(ae, Autoencoder):
            raise ValueError(f"AE {run.ae_version} is not a SOLARIS autoencoder")
        keys, members = largest_cohorts(user_cohorts(fm.user, recent), recent, p.cohorts)
        users, listed = np.repeat(members, len(items)), np.tile(items, len(members))
        no_history = HistoryIndex.from_table(history_table(log, np.zeros(0, np.int64), start, 1))
        codes = embed_codes(fm, ae, no_history, users, listed, start, p.batch_size, p.device, new_users=True)
        storable = finite_rows(codes, run.code_dtype)
        meta[DEGENERATE["cohort"]] = int((~storable).sum())
        keys = np.repeat(keys, len(items))[storable]
        meta["cohort_codes_written"] = write_cohort_codes(run, settings, keys, listed[storable], codes[storable])
    return meta


def write_cohort_codes(run: HourRun, settings: Settings, keys: np.ndarray, items: np.ndarray, codes: np.ndarray) -> int:
    """The codes as their cohorts' prototype users' pair codes, fresh for this hour only."""
    with open_configured_store(settings) as store:
        return store.write_pair_embeddings(
            run.run_key,
            run.embedding_version,
            prototype_ids(keys),
            items,
            codes,
            np.zeros(len(items), np.float32),
            run.interval_start,
            run.interval_end,
        )


def most_shown(log: EventLog, start: datetime, window_hours: int, n: int) -> np.ndarray:
    """The ``n`` items with the most impressions in the ``window_hours`` before ``start``, most shown first."""
    shown = log.impressions(start - timedelta(hours=window_hours), start, ["item_id"])
    if not n or not shown.num_rows:
        return np.zeros(0, np.int64)
    counts = pc.value_counts(shown["item_id"])
    items = counts.field("values").to_numpy().astype(np.int64)
    order = np.lexsort((items, -counts.field("counts").to_numpy()))  # ties by id: a rerun picks the same
    return items[order[:n]]


def largest_cohorts(keys: np.ndarray, users: np.ndarray, n: int) -> tuple[np.ndarray, np.ndarray]:
    """The ``n`` cohort keys with the most users (ties by key) and one member of each, the smallest id: the
    FM reads the cohort's side features from a member's row and never its id (``new_users``)."""
    distinct, sizes = np.unique(keys, return_counts=True)
    chosen = distinct[np.lexsort((distinct, -sizes))[:n]]
    return chosen, np.array([users[keys == key].min() for key in chosen], np.int64)
