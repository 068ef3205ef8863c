"""The feature-store interface the precompute, the ranker, the replay and the UI program against.

Shaped like Feast's online store (one abstract interface, one typed config per backend), with what Feast
lacks: every read is point-in-time (a read at ``t`` returns a row only when ``created_at <= t < expires_at``, so
the TTL is enforced and a backfill or replay of an earlier hour never sees rows written for a later one), rows
are scoped to an embedding version, and every time is passed in (logical time), never read from the clock.

History is not kept: each table holds one row per key (a write replaces the key's older row, and a user's or
an item's neighbour list is replaced whole), so a read at a ``t`` before the newer row's ``created_at`` finds
nothing for that key, even where the replaced row was valid at ``t``.
"""

from __future__ import annotations

from abc import ABC, abstractmethod
from collections.abc import Mapping, Sequence
from dataclasses import replace
from datetime import datetime

import numpy as np

from solaris.store import validate
from solaris.store.codec import encode_lists, to_micros
from solaris.store.errors import StoreError, StoreNotInitialised
from solaris.store.records import (
    RUN_STATUSES,
    EmbeddingVersion,
    ExposureCounts,
    RunRecord,
    TableStats,
    TierBatchRead,
    TierRead,
)


class FeatureStore(ABC):
    """Embeddings keyed by (embedding version, user[, item]) with a TTL, and the precompute's run records.

    Writes are bulk and transactional: a batch is validated whole, then written in one transaction, so a
    reader sees all of it or none. Writes upsert by key, so re-running a run rewrites its rows in place.

    Every ``write_*`` takes the ``run_id`` writing the batch (non-empty, recorded on every row), ``created_at``
    (when the rows were computed: timezone-aware, logical time) and ``expires_at`` (after ``created_at``; a
    read at ``t >= expires_at`` no longer returns the rows, nor one at ``t < created_at``), and all but
    exposure counts a registered embedding ``version`` id, which fixes the vectors' dimension and storage
    dtype. An unknown version or a batch failing a check is a :class:`StoreError`, and nothing is written.

    Reads take the time ``t`` they are for and return only rows of the asked version with
    ``created_at <= t < expires_at``, one round trip per tier; one row per key, so not the replaced ones.
    """

    #: Reads never wait on a network, and ``read_tiers_batch(..., timeout_s=...)`` interrupts one that
    #: runs too long: a latency-critical caller may read on its own thread instead of handing the read to
    #: a pool it can stop waiting for (a stalled socket cannot be interrupted from the reading thread).
    local_reads: bool = False

    @abstractmethod
    def init_schema(self) -> None:
        """Create the tables if they are missing (idempotent)."""

    @abstractmethod
    def close(self) -> None:
        """Release the store's database connections (the serving reads' and the engine's pool); ``with`` calls it."""

    @abstractmethod
    def register_embedding_version(
        self, fm_version: str, ae_version: str, dim: int, dtype: str = "float16", *, created_at: datetime
    ) -> str:
        """Register (idempotently) the version made by this FM and AE; returns its deterministic id."""

    @abstractmethod
    def initialised(self) -> bool:
        """Whether the store's tables exist (``open_store(..., init=True)``, ``solaris store init`` create them)."""

    def check_initialised(self) -> None:
        """:class:`StoreNotInitialised`, naming the command that creates the tables, where they do not exist: a
        reader of an empty database should not meet the driver's "no such table"."""
        if not self.initialised():
            raise StoreNotInitialised(
                "the feature store has no tables yet: `solaris store init` creates them (so does the first precompute)"
            )

    @abstractmethod
    def get_embedding_version(self, version_id: str) -> EmbeddingVersion:
        """The registered version; :class:`StoreError` if it is unknown."""

    def write_pair_embeddings(
        self,
        run_id: str,
        version: str,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        vectors: np.ndarray,
        scores: np.ndarray,
        created_at: datetime,
        expires_at: datetime,
    ) -> int:
        """Upsert one run's pair embeddings, the direct tier.

        Args:
            user_ids: [n] non-negative integer user ids.
            item_ids: [n] non-negative integer item ids; no (user, item) pair may appear twice in the batch.
            vectors: [n, dim] finite pair embeddings, stored as the version's dtype.
            scores: [n] the verifier's finite score of each pair.

        Returns:
            The number of pairs written; a pair already stored under this version is replaced.
        """
        ver = self.get_embedding_version(version)
        stamp = validate.stamp(run_id, ver, created_at, expires_at)
        batch = validate.pair_batch(stamp, ver, user_ids, item_ids, vectors, scores)
        if len(batch.user_ids):
            self._write_pairs(batch)
        return len(batch.user_ids)

    def write_user_aggregates(
        self,
        run_id: str,
        version: str,
        user_ids: np.ndarray,
        vectors: np.ndarray,
        pair_counts: np.ndarray,
        window_hours: int,
        created_at: datetime,
        expires_at: datetime,
    ) -> int:
        """Upsert one run's user aggregates (each user's mean pair vector).

        Args:
            user_ids: [n] non-negative integer user ids, each at most once in the batch.
            vectors: [n, dim] finite aggregate vectors, stored as the version's dtype.
            pair_counts: [n] non-negative integers: how many pair vectors each aggregate is the mean of.
            window_hours: The trailing window the aggregates cover, a positive integer, stored on every row.

        Returns:
            The number of users written; a user already stored under this version is replaced.
        """
        ver = self.get_embedding_version(version)
        stamp = validate.stamp(run_id, ver, created_at, expires_at)
        batch = validate.aggregate_batch(stamp, ver, user_ids, vectors, pair_counts, window_hours)
        if len(batch.user_ids):
            self._write_aggregates(batch)
        return len(batch.user_ids)

    def write_user_neighbours(
        self,
        run_id: str,
        version: str,
        user_ids: np.ndarray,
        neighbour_ids: np.ndarray,
        similarities: np.ndarray,
        created_at: datetime,
        expires_at: datetime,
    ) -> int:
        """Replace each listed user's neighbour list (``neighbour_ids`` is [n, k], padded with -1)."""
        stamp = validate.stamp(run_id, self.get_embedding_version(version), created_at, expires_at)
        batch = validate.neighbour_batch(stamp, user_ids, neighbour_ids, similarities, "user")
        if len(batch.owners):
            self._write_neighbours(batch)
        return len(batch.owner_ids)

    def write_item_neighbours(
        self,
        run_id: str,
        version: str,
        item_ids: np.ndarray,
        neighbour_ids: np.ndarray,
        similarities: np.ndarray,
        created_at: datetime,
        expires_at: datetime,
    ) -> int:
        """Replace each listed item's neighbour list (``neighbour_ids`` is [n, k], padded with -1), the lists
        the A2A tier reads; an item listed twice or listing itself, a shape or a non-finite similarity is a
        :class:`StoreError`. Returns the number of items written (an item with an empty list only loses its old
        one)."""
        stamp = validate.stamp(run_id, self.get_embedding_version(version), created_at, expires_at)
        batch = validate.neighbour_batch(stamp, item_ids, neighbour_ids, similarities, "item")
        if len(batch.owners):
            listed = np.asarray(neighbour_ids, np.int64)
            try:
                lists = encode_lists(listed, np.where(listed >= 0, np.asarray(similarities, np.float64), 0.0))
            except ValueError as error:
                raise StoreError(f"item lists: {error}") from None
            self._write_item_lists(stamp, batch.owners, lists)
        return len(batch.owners)

    def write_exposure_counts(
        self, run_id: str, counts: ExposureCounts, created_at: datetime, expires_at: datetime
    ) -> int:
        """Replace each listed user's exposure counters (as of ``created_at``); a user listed twice, a pair of an
        unlisted user or listed twice, a negative or non-integer count, a width other than
        ``len(exposure.WINDOWS_H)`` is a :class:`StoreError`. A user with no pairs still gets a row (its windows
        may have emptied). Returns the number of users written."""
        batch = validate.exposure_batch(run_id, created_at, expires_at, counts)
        if len(batch.user_ids):
            self._write_exposure(batch)
        return len(batch.user_ids)

    # The backend's side of the writes: each gets a batch checked whole and not empty, to write in one
    # transaction.

    @abstractmethod
    def _write_pairs(self, batch: validate.PairBatch) -> None: ...

    @abstractmethod
    def _write_aggregates(self, batch: validate.AggregateBatch) -> None: ...

    @abstractmethod
    def _write_neighbours(self, batch: validate.NeighbourBatch) -> None:
        """Replace the users' lists of ``batch.owners`` (delete, then insert)."""

    @abstractmethod
    def _write_item_lists(self, stamp: validate.Stamp, items: np.ndarray, lists: list[bytes]) -> None:
        """Upsert each item's packed list (:func:`~solaris.store.codec.encode_lists`)."""

    @abstractmethod
    def _write_exposure(self, batch: validate.ExposureBatch) -> None:
        """Upsert each user's packed counters."""

    @abstractmethod
    def read_tiers_batch(
        self,
        version: str,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        t: datetime,
        timeout_s: float | None = None,
        cohorts: np.ndarray | None = None,
    ) -> TierBatchRead:
        """Every tier for each (user, item) pair, fresh at ``t`` (``created_at <= t < expires_at``); ``timeout_s``
        only where ``local_reads`` (past it, :class:`StoreReadTimeout`).

        Given ``cohorts`` (each row's user's cohort key, :mod:`solaris.enrichment.cohorts`), a row whose user
        has no exposure counters and no pair code of its own gets its cohort's fresh code for the item in the
        pair slot (``cohort_mask``), read in a second round trip made only when such rows exist.

        The neighbour tier for pair (u, i) is ``sum_j s_j * pair(j, i) / sum_j s_j`` over u's fresh
        neighbours j with similarity ``s_j > 0`` that have a fresh pair (j, i); its mask is true iff at
        least one such j exists.

        The A2A (ad-to-ad) tier for pair (u, i) is ``sum_j s_ij * pair(u, j) / sum_j s_ij`` over i's fresh item
        neighbours j with ``s_ij > 0`` for which u has a fresh pair (u, j): what u's own codes say about the
        ads like i, for a candidate u has no code for. Its mask is true iff at least one such j exists; the
        pair (u, i)'s own row does not enter it.
        """

    def read_tiers(self, version: str, user_id: int, item_ids: np.ndarray, t: datetime) -> TierRead:
        """The serving read for one request: :meth:`read_tiers_batch` for one user."""
        items = np.asarray(item_ids, dtype=np.int64)
        return self.read_tiers_batch(version, np.full(len(items), user_id, dtype=np.int64), items, t).row_for_user()

    @abstractmethod
    def fresh_pairs(self, version: str, user_ids: np.ndarray, item_ids: np.ndarray, t: datetime) -> np.ndarray:
        """Bool mask: which pairs have a row fresh at ``t``, ``created_at <= t < expires_at`` (the precompute
        skips those)."""

    @abstractmethod
    def expire(self, t: datetime, batch_size: int = 10_000) -> dict[str, int]:
        """Delete everything with ``expires_at <= t`` in batches of at most ``batch_size`` rows."""

    def start_run(
        self,
        run_id: str,
        interval_start: datetime,
        interval_end: datetime,
        fm_version: str,
        ae_version: str,
        vm_version: str,
        embedding_version: str,
        started_at: datetime,
        selector: str | None = None,
        selector_reason: str | None = None,
    ) -> None:
        """Record a run as running, with the selector it runs and why; starting a known run id again (a retry)
        resets its record, but for its figures."""
        if to_micros(interval_end, "interval_end") <= to_micros(interval_start, "interval_start"):
            raise StoreError(f"run {run_id!r}: interval_end is not after interval_start")
        self.get_embedding_version(embedding_version)
        run = (run_id, interval_start, interval_end, fm_version, ae_version, vm_version, embedding_version)
        opened = RunRecord(*run, RUN_STATUSES[0], {}, {}, started_at, None)
        self._start_run(replace(opened, selector=selector, selector_reason=selector_reason))

    def finish_run(
        self,
        run_id: str,
        status: str,
        counts: Mapping[str, int],
        timings: Mapping[str, float],
        finished_at: datetime,
        reason: str | None = None,
    ) -> None:
        """Close a started run: set its final status, counts, timings and finish time, replacing any earlier ones.

        Args:
            run_id: A run recorded by :meth:`start_run`.
            status: ``"succeeded"``, ``"failed"`` or ``"skipped"``.
            counts: Named integer counts of the run (rows written, ...), stored as JSON.
            timings: Named durations in seconds, stored as JSON.
            finished_at: Timezone-aware, not before the run's ``started_at``.
            reason: Why it failed, where known (shown with the run).

        Raises:
            StoreError: The status is not a final one, the run was never started, or it finishes before it began.
        """
        if status not in RUN_STATUSES[1:]:
            raise StoreError(f"run {run_id!r}: finish status {status!r} is not one of {', '.join(RUN_STATUSES[1:])}")
        run = self.get_run(run_id)
        if run is None:
            raise StoreError(f"run {run_id!r} was never started")
        if to_micros(finished_at, "finished_at") < to_micros(run.started_at, "started_at"):
            raise StoreError(f"run {run_id!r}: finished_at {finished_at.isoformat()} is before its start")
        counts = {k: int(v) for k, v in counts.items()}
        timings = {k: float(v) for k, v in timings.items()}
        closed = replace(run, status=status, counts=counts, timings=timings, finished_at=finished_at, reason=reason)
        self._finish_run(closed)

    def sweep_unfinished_runs(self, reason: str, finished_at: datetime, keep: str | None = None) -> list[str]:
        """Mark failed, with ``reason``, every run still ``running`` but ``keep``; returns their ids.

        A run whose process died (a killed task, a stopped stack) never closes its record. One precompute runs
        at a time (the DAG's ``max_active_runs``), so when the next one starts, or the stack comes up, no other
        run is still going. A run that resumes later (a retried task) restarts its record.
        """
        swept = [run_id for run_id in self._running_run_ids() if run_id != keep]
        for run_id in swept:
            run = self.get_run(run_id)
            if run is not None and run.status == RUN_STATUSES[0]:  # one finishing meanwhile keeps its own ending
                at = max(finished_at, run.started_at)
                self._finish_run(replace(run, status=RUN_STATUSES[2], finished_at=at, reason=reason))
        return swept

    def record_run_figures(self, run_id: str, figures: Mapping[str, float]) -> None:
        """Replace a started run's quality figures (JSON, like its counts).

        They are recorded when measured, not at :meth:`finish_run`: they describe the hour before the run, so
        they hold whatever the run itself then does (a failed or skipped run keeps them too). :meth:`start_run`
        keeps them on a retry: measured before the first attempt wrote, they are what a retry cannot measure
        again (the attempt replaced the aggregates and neighbours the hour was served from).

        Raises:
            StoreError: The run was never started, or a figure is not a finite number; nothing is written.
        """
        values = {k: float(v) for k, v in figures.items()}
        if bad := sorted(k for k, v in values.items() if not np.isfinite(v)):
            raise StoreError(f"run {run_id!r}: figures {', '.join(bad)} are not finite")
        if self.get_run(run_id) is None:
            raise StoreError(f"run {run_id!r} was never started")
        self._record_run_figures(run_id, values)

    # The backend's side of the run records, given a run checked as the public methods say.

    @abstractmethod
    def _start_run(self, run: RunRecord) -> None:
        """Record ``run`` (running, no counts or timings yet), replacing any record of its id but for its figures."""

    @abstractmethod
    def _finish_run(self, run: RunRecord) -> None:
        """Store ``run``'s status, counts, timings and finish time on its record."""

    @abstractmethod
    def _record_run_figures(self, run_id: str, figures: dict[str, float]) -> None: ...

    @abstractmethod
    def _running_run_ids(self) -> list[str]:
        """The runs whose record says ``running``."""

    @abstractmethod
    def get_run(self, run_id: str) -> RunRecord | None:
        """One run's record as :meth:`start_run` and :meth:`finish_run` left it (a failing task checks it exists).

        Args:
            run_id: The run's id as given to :meth:`start_run`.

        Returns:
            The run as last recorded (``finished_at`` None while it runs), or None if no run has that id.
        """

    @abstractmethod
    def recent_runs(self, n: int = 20) -> Sequence[RunRecord]:
        """The ``n`` latest runs by logical interval, newest first."""

    @abstractmethod
    def stats(self, version: str, t: datetime) -> dict[str, TableStats]:
        """Per table (pair_embeddings, user_aggregates, user_neighbours, item_neighbours, exposure_counts): sizes
        and freshness at ``t``; exposure_counts belongs to no version, so all its rows count for every one.

        ``rows`` and the oldest / newest ``created_at`` cover every stored row of the version; ``fresh`` and
        ``expiring_within_hour`` only those a read at ``t`` sees (``created_at <= t < expires_at``).
        """

    def __enter__(self) -> FeatureStore:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
