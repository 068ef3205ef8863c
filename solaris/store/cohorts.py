"""How the store keeps and serves the new-user cohort tier (:mod:`solaris.enrichment.cohorts`).

A cohort's codes are the pair codes of a prototype user, id ``COHORT_USER_BASE + key``, so the pair table's
rules (version, TTL, expiry, one row per key) hold for them unchanged; real user ids are model inputs, below
2**24 (:data:`solaris.models.features.MAX_EXACT_ID`), far from that range. A row gets its cohort's code when
its user has no exposure counters (no impression in the counters' longest window) and no pair code of its
own: a user back after longer than that gets the code of a new user, an approximation the replay measures
with the rest.
"""

from __future__ import annotations

import numpy as np

from solaris.exposure import WINDOWS_H
from solaris.store.records import TierBatchRead

COHORT_USER_BASE = 1 << 62


def prototype_ids(keys: np.ndarray) -> np.ndarray:
    """The store's user id for each cohort's codes."""
    return COHORT_USER_BASE + np.asarray(keys, np.int64)


def new_user_rows(user_counts: np.ndarray, pair_mask: np.ndarray) -> np.ndarray:
    """The rows a cohort code may feed: no impression counted for the user, no pair code of its own."""
    return ~np.asarray(user_counts).any(axis=1) & ~np.asarray(pair_mask, bool)


def cohort_requests(
    read: TierBatchRead, keys: np.ndarray, item_ids: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """After a request's first read: the rows a cohort code may feed, and the (prototype user, item) pairs to
    read for them, one per row."""
    new = np.flatnonzero(new_user_rows(read.exposure[:, : len(WINDOWS_H)], read.pair_mask))
    return new, prototype_ids(np.asarray(keys, np.int64)[new]), np.asarray(item_ids, np.int64)[new]
