"""The feature store's typed values: what its reads return and what its run records hold."""

from __future__ import annotations

from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np


@dataclass(frozen=True)
class EmbeddingVersion:
    version_id: str
    fm_version: str
    ae_version: str
    dim: int
    dtype: str
    created_at: datetime


@dataclass(frozen=True)
class TierRead:
    """One user's candidates, ready for the model (float32, zeros where a tier has nothing)."""

    pair: np.ndarray  # [n, d]
    pair_mask: np.ndarray  # [n] bool
    user_agg: np.ndarray  # [d]
    user_agg_present: bool
    knn: np.ndarray  # [n, d]
    knn_mask: np.ndarray  # [n] bool
    a2a: np.ndarray  # [n, d]
    a2a_mask: np.ndarray  # [n] bool
    exposure: np.ndarray  # [n, 2 * windows] raw counts, as in TierBatchRead


@dataclass(frozen=True)
class ExposureCounts:
    """Impressions before a time over each window of :data:`solaris.exposure.WINDOWS_H`: per user, and per
    (user, item) pair the user was shown. Not scoped to an embedding version: every VM reads the same counts."""

    user_ids: np.ndarray  # [n] distinct user ids
    user_counts: np.ndarray  # [n, windows] non-negative integers
    pair_user_ids: np.ndarray  # [m] each one of user_ids
    pair_item_ids: np.ndarray  # [m] item ids below 2**31; (user, item) distinct
    pair_counts: np.ndarray  # [m, windows] non-negative integers


@dataclass(frozen=True)
class TierBatchRead:
    """Many (user, item) pairs at once, row i answering pair i; same rules as :class:`TierRead`.

    Per pair (u, i): ``pair`` is its own code, ``user_agg`` u's aggregate, ``knn`` what u's neighbours' codes
    say of i, ``a2a`` what u's own codes say of i's neighbours (:meth:`FeatureStore.read_tiers_batch`).
    """

    pair: np.ndarray  # [n, d]
    pair_mask: np.ndarray  # [n] bool
    user_agg: np.ndarray  # [n, d]
    user_agg_mask: np.ndarray  # [n] bool
    knn: np.ndarray  # [n, d]
    knn_mask: np.ndarray  # [n] bool
    a2a: np.ndarray  # [n, d]
    a2a_mask: np.ndarray  # [n] bool
    # [n, 2 * len(exposure.WINDOWS_H)] float32 raw impression counts before the counters' ``created_at``: the
    # user's per window, then the pair's (exposure.columns()); zeros where the store holds no counters
    exposure: np.ndarray
    # [n] bool: ``pair`` holds the code of the user's side-feature cohort, the FM's code for a user it has
    # never seen (solaris.enrichment.cohorts), where the user has no counters and no pair code (pair_mask False)
    cohort_mask: np.ndarray

    def with_cohort(self, rows: np.ndarray, codes: np.ndarray, found: np.ndarray) -> TierBatchRead:
        """This read with ``codes`` (one per index of ``rows``) in the pair slot of the ``rows`` where ``found``."""
        at = np.asarray(rows)[np.asarray(found, bool)]
        pair, mask = self.pair.copy(), np.zeros(len(self.pair_mask), bool)
        pair[at], mask[at] = codes[np.asarray(found, bool)], True
        return replace(self, pair=pair, cohort_mask=mask)

    def row_for_user(self) -> TierRead:
        """The single-user view; valid when every row belongs to the same user."""
        dim = self.pair.shape[1]
        present = bool(self.user_agg_mask[0]) if len(self.user_agg_mask) else False
        user_agg = self.user_agg[0] if len(self.user_agg) else np.zeros(dim, dtype=np.float32)
        return TierRead(
            self.pair,
            self.pair_mask,
            user_agg,
            present,
            self.knn,
            self.knn_mask,
            self.a2a,
            self.a2a_mask,
            self.exposure,
        )


@dataclass(frozen=True)
class RunRecord:
    run_id: str
    interval_start: datetime
    interval_end: datetime
    fm_version: str
    ae_version: str
    vm_version: str
    embedding_version: str
    status: str
    counts: dict[str, int]
    timings: dict[str, float]
    started_at: datetime
    finished_at: datetime | None
    # The quality figures of the hour before the run (hit rate while fresh, coverage, FM calls per covered
    # candidate, ...), as its coverage step measured them: :meth:`FeatureStore.record_run_figures`.
    figures: dict[str, float] = field(default_factory=dict)
    reason: str | None = None  # why it failed, where known (a swept run: :meth:`FeatureStore.sweep_unfinished_runs`)
    # The selector the run ran and why (the budget selector falls back to the verifier under a weak demand model:
    # solaris.precompute.selector_choice); None in a record written before it.
    selector: str | None = None
    selector_reason: str | None = None


@dataclass(frozen=True)
class TableStats:
    rows: int
    fresh: int
    oldest_created_at: datetime | None
    newest_created_at: datetime | None
    expiring_within_hour: int

    @property
    def fresh_share(self) -> float:
        return self.fresh / self.rows if self.rows else 0.0


# "skipped": the run had nothing to do (no events before its hour), which is neither a success nor a failure.
RUN_STATUSES = ("running", "succeeded", "failed", "skipped")
