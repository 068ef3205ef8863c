"""The precompute's run records (``precompute_runs``) on either SQL backend: mixed into
:class:`~solaris.store.sql_store.SqlFeatureStore`, whose engine, statements and readers they use."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from datetime import datetime

import numpy as np

from solaris.store.codec import from_micros, to_micros
from solaris.store.errors import StoreError
from solaris.store.records import RUN_STATUSES, RunRecord


class SqlRunRecords:
    """One row per run: opened by ``start_run``, closed once by ``finish_run``, its quality figures beside."""

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
    ) -> None:
        start, end = to_micros(interval_start, "interval_start"), to_micros(interval_end, "interval_end")
        if end <= start:
            raise StoreError(f"run {run_id!r}: interval_end is not after interval_start")
        self.get_embedding_version(embedding_version)
        params = dict(
            run_id=run_id,
            interval_start=start,
            interval_end=end,
            fm_version=fm_version,
            ae_version=ae_version,
            vm_version=vm_version,
            embedding_version=embedding_version,
            started_at=to_micros(started_at, "started_at"),
        )
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("start_run"), params)

    def finish_run(
        self,
        run_id: str,
        status: str,
        counts: Mapping[str, int],
        timings: Mapping[str, float],
        finished_at: datetime,
    ) -> None:
        if status not in RUN_STATUSES[1:]:
            raise StoreError(f"run {run_id!r}: finish status {status!r} is not one of {', '.join(RUN_STATUSES[1:])}")
        run = self.get_run(run_id)
        if run is None:
            raise StoreError(f"run {run_id!r} was never started")
        finished = to_micros(finished_at, "finished_at")
        if finished < to_micros(run.started_at, "started_at"):
            raise StoreError(f"run {run_id!r}: finished_at {finished_at.isoformat()} is before its start")
        # Keys sorted: the record is the same bytes whichever runner collected the steps' counts (Airflow's
        # XCom hands a task's dict back in another order than the in-process runner).
        params = dict(
            run_id=run_id,
            status=status,
            counts=json.dumps({k: int(v) for k, v in counts.items()}, sort_keys=True),
            timings=json.dumps({k: float(v) for k, v in timings.items()}),
            finished_at=finished,
        )
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("finish_run"), params)

    def record_run_figures(self, run_id: str, figures: Mapping[str, float]) -> None:
        values = {k: float(v) for k, v in figures.items()}
        if bad := sorted(k for k, v in values.items() if not np.isfinite(v)):
            raise StoreError(f"run {run_id!r}: figures {', '.join(bad)} are not finite")
        if self.get_run(run_id) is None:
            raise StoreError(f"run {run_id!r} was never started")
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("record_run_figures"), {"run_id": run_id, "figures": json.dumps(values)})

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._reader.connect() as conn:
            rows = self._rows(conn, "get_run", {"run_id": run_id})
        return _run_record(rows[0]) if rows else None

    def recent_runs(self, n: int = 20) -> Sequence[RunRecord]:
        with self._reader.connect() as conn:
            return [_run_record(r) for r in self._rows(conn, "recent_runs", {"n": int(n)})]


def _run_record(row: tuple) -> RunRecord:
    run_id, start, end, fm, ae, vm, ev, status, counts, timings, started, finished, figures = row
    return RunRecord(
        run_id,
        from_micros(start),
        from_micros(end),
        fm,
        ae,
        vm,
        ev,
        status,
        json.loads(counts),
        json.loads(timings),
        from_micros(started),
        from_micros(finished),
        json.loads(figures),
    )
