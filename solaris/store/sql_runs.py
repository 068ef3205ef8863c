"""The precompute's run records (``precompute_runs``) on either SQL backend: mixed into
:class:`~solaris.store.sql_store.SqlFeatureStore`, whose engine, statements and readers they use."""

from __future__ import annotations

import json
from collections.abc import Sequence

from solaris.store.codec import from_micros, to_micros
from solaris.store.records import RunRecord


class SqlRunRecords:
    """One row per run: opened by ``start_run``, closed once by ``finish_run``, its quality figures beside.

    :class:`~solaris.store.base.FeatureStore`'s public run methods check their arguments; these hooks only
    encode (times as microseconds, dicts as JSON) and write."""

    def _start_run(self, run: RunRecord) -> None:
        params = dict(
            run_id=run.run_id,
            interval_start=to_micros(run.interval_start, "interval_start"),
            interval_end=to_micros(run.interval_end, "interval_end"),
            fm_version=run.fm_version,
            ae_version=run.ae_version,
            vm_version=run.vm_version,
            embedding_version=run.embedding_version,
            started_at=to_micros(run.started_at, "started_at"),
            selector=run.selector,
            selector_reason=run.selector_reason,
        )
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("start_run"), params)

    def _finish_run(self, run: RunRecord) -> None:
        # Keys sorted: the record is the same bytes whichever runner collected the steps' counts (Airflow's
        # XCom hands a task's dict back in another order than the in-process runner).
        params = dict(
            run_id=run.run_id,
            status=run.status,
            counts=json.dumps(run.counts, sort_keys=True),
            timings=json.dumps(run.timings),
            finished_at=to_micros(run.finished_at, "finished_at"),
            reason=run.reason,
        )
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("finish_run"), params)

    def _record_run_figures(self, run_id: str, figures: dict[str, float]) -> None:
        with self._engine.begin() as conn:
            conn.exec_driver_sql(self._sql("record_run_figures"), {"run_id": run_id, "figures": json.dumps(figures)})

    def get_run(self, run_id: str) -> RunRecord | None:
        with self._reader.connect() as conn:
            rows = self._rows(conn, "get_run", {"run_id": run_id})
        return _run_record(rows[0]) if rows else None

    def recent_runs(self, n: int = 20) -> Sequence[RunRecord]:
        with self._reader.connect() as conn:
            return [_run_record(r) for r in self._rows(conn, "recent_runs", {"n": int(n)})]

    def _running_run_ids(self) -> list[str]:
        with self._reader.connect() as conn:
            return [row[0] for row in self._rows(conn, "running_runs", {})]


def _run_record(row: tuple) -> RunRecord:
    run_id, start, end, fm, ae, vm, ev, status, counts, timings, started, finished, figures, reason, selector, why = row
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
        reason,
        selector,
        why,
    )
