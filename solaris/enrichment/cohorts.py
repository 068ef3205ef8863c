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

KEY_RADIX = 1 << 10  # side-feature codes per position in a key
MAX_FEATURES = 6  # KEY_RADIX ** MAX_FEATURES stays below the store's COHORT_USER_BASE


def cohort_keys(features: np.ndarray) -> np.ndarray:
    """One key per row of side-feature codes (an ``IdTable``'s rows: category + 1, 0 for unknown)."""
    codes = np.asarray(features, np.int64)
    if codes.ndim != 2 or codes.shape[1] > MAX_FEATURES:
        raise ValueError(f"cohort keys take [n, <= {MAX_FEATURES}] side-feature codes, got shape {codes.shape}")
    if codes.size and (codes.min() < 0 or codes.max() >= KEY_RADIX):
        raise ValueError(f"side-feature codes must lie in [0, {KEY_RADIX}) to form cohort keys")
    return codes @ (KEY_RADIX ** np.arange(codes.shape[1], dtype=np.int64))


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
