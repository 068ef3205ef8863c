"""The cohort tier: the FM's code for a user it has never seen, which depends on the user's side features only.

For a user with no history, the FM's pair embedding is a function of the user's side features, the item and
the hour alone: an id the FM never trained on takes its learned unknown row (``SideEmbedding``), and the
history and exposure inputs are empty. So the hourly run can write, for the side-feature cohorts of recent
users and the items most shown, the code a new user of the cohort gets, before anyone of it arrives: not an
approximation of that user's pair code but the code itself. No tier keyed by the user reaches a user in
their first hour (:mod:`solaris.eval.ceiling`), which on MovieLens-100K is 73% of the served impressions.

The store keeps a cohort's codes as the pair codes of a prototype user and serves them to the users who
have no history (:mod:`solaris.store.cohorts`).
"""

from __future__ import annotations

from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:  # torch and the log: imported only by the functions that read them
    from solaris.data.eventlog import EventLog
    from solaris.models.layers import SideEmbedding

KEY_BITS = 60  # keys lie in [0, 2**60): the store's prototype ids, COHORT_USER_BASE + key, stay in int64
_MIX = np.uint64(0x9E3779B97F4A7C15)  # an odd 64-bit constant (the golden ratio's): mixes each code in


def cohort_keys(features: np.ndarray) -> np.ndarray:
    """One key per row of side-feature codes (an ``IdTable``'s rows: category + 1, 0 for unknown): a 60-bit
    hash of the row, so a log with many side features, or one with thousands of categories, still forms
    cohorts (two cohorts share a key with odds about n**2 / 2**61). The all-unknown row's key is 0."""
    codes = np.asarray(features, np.int64)
    if codes.ndim != 2:
        raise ValueError(f"cohort keys take [n, features] side-feature codes, got shape {codes.shape}")
    if codes.size and codes.min() < 0:
        raise ValueError("side-feature codes must be at least 0 (0: unknown) to form cohort keys")
    key = np.zeros(len(codes), np.uint64)
    with np.errstate(over="ignore"):
        for column in codes.T.astype(np.uint64):
            key = (key ^ column) * _MIX
            key ^= key >> np.uint64(29)
    return (key >> np.uint64(64 - KEY_BITS)).astype(np.int64)


class CohortLookup:
    """A model's user table as one cohort key per row, built once: a request's keys are then a numpy gather
    (a few microseconds for 200 candidates, against 37 through the model's torch buffers). An id outside the
    table takes row 0, the all-unknown cohort (key 0), as the model's own lookup does."""

    def __init__(self, users: SideEmbedding) -> None:
        self.by_row = cohort_keys(users.features.cpu().numpy())

    def __call__(self, user_ids: np.ndarray) -> np.ndarray:
        ids = np.asarray(user_ids, np.int64)
        return self.by_row[np.where((ids >= 0) & (ids < len(self.by_row) - 1), ids + 1, 0)]


def user_cohorts(users: SideEmbedding, user_ids: np.ndarray) -> np.ndarray:
    """Each user's cohort key from a model's user table (:class:`CohortLookup`, for a one-off lookup)."""
    return CohortLookup(users)(user_ids)


def log_cohorts(log: EventLog, user_ids: np.ndarray) -> np.ndarray:
    """Each user's cohort key from the log's users table, encoded as the models' tables are: for the hourly
    figures, which load no model."""
    from solaris.data.schema import USER_FEATURE_PREFIX
    from solaris.models.features import IdTable

    table = IdTable.from_table(log.users(), "user_id", USER_FEATURE_PREFIX)
    return cohort_keys(table.features[table.rows(user_ids)])
