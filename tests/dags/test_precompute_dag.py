"""``solaris_precompute`` run through Airflow (``dag.test()``) on the tiny world, SQLite and PostgreSQL stores."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pytest
import sqlalchemy as sa
from precompute_env import LEAD, backend_settings, export
from store_state import store_checksum

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute import nodes
from solaris.precompute.codelog import CodeLog
from solaris.precompute.pipeline import PRECOMPUTE
from solaris.precompute.run import run_hour
from solaris.precompute.spec import run_key
from solaris.store import open_store
from solaris.store.records import RunRecord
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World

CONF = {"shards": 2, "batch_size": 2048, "device": "cpu", "ttl_hours": 4, "top_fraction": 0.2}
HOUR = timedelta(hours=30)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def dag_settings(
    request: pytest.FixtureRequest,
    trained: tuple[Settings, World, TrainReport],
    airflow_env: dict[str, str],
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
) -> Settings:
    settings = backend_settings(request, trained[0], tmp_path, "dag")
    export(settings, monkeypatch)
    return settings


def _task_tries(dag_run: Any) -> dict[str, tuple[str, int]]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: (str(ti.state), ti.try_number) for ti in dag_run.get_task_instances(session=session)}


def _record(settings: Settings, hour: datetime) -> RunRecord | None:
    with open_store(settings.store_url) as store:
        return store.get_run(run_key(hour))


def test_precompute_dag_runs_end_to_end(dagbag: Any, dag_settings: Settings) -> None:
    settings = dag_settings
    logical = EventLog(settings.world_dir()).start + HOUR + timedelta(minutes=20)  # any time in the hour
    start = logical.replace(minute=0)
    dag_run = dagbag.dags["solaris_precompute"].test(logical_date=logical, run_conf=CONF)

    assert dag_run.state == "success", _task_tries(dag_run)
    tries = _task_tries(dag_run)
    assert tries["mark_failed"][0] == "skipped" and tries["finish"][0] == "success"
    pinned = registry.resolve_champions(registry.connect(settings), LEAD.name)
    with open_store(settings.store_url) as store:
        record = store.get_run(run_key(start))
        assert record is not None and record.status == "succeeded"
        assert (record.interval_start, record.interval_end) == (start, start + timedelta(hours=1))
        assert (record.fm_version, record.ae_version, record.vm_version) == (pinned.fm, pinned.ae, pinned.vm)
        assert record.counts["embedded"] == record.counts["pairs_written"] == record.counts["selected"] > 0
        assert set(record.timings) == {"resolve", *PRECOMPUTE.names}
        written = CodeLog(settings.data_dir / "precompute" / "codes", pinned.embedding_version, 32).read(
            start, start + timedelta(hours=1)
        )
        assert len(written.user_ids) == record.counts["pairs_written"]
        served = store.read_tiers_batch(pinned.embedding_version, written.user_ids, written.item_ids, start)
    assert served.pair_mask.all() and served.user_agg_mask.all()
    np.testing.assert_allclose(served.pair, written.codes, atol=2e-2 * np.abs(written.codes).max())
    assert not any((settings.data_dir / "staging").iterdir()), "staging is removed after success"


@pytest.fixture
def failing_first_pair_write(dag_settings: Settings) -> Iterator[dict[str, Any]]:
    """Once armed, fail the next transaction that inserts pair rows, after the insert ran; checksum the store
    as a reader sees it at that moment, from a connection of its own."""
    seen: dict[str, Any] = {"failures": 0, "armed": False}

    def inject(conn: Any, cursor: Any, statement: str, *args: Any) -> None:
        if statement.lstrip().startswith("INSERT INTO pair_embeddings") and seen["armed"]:
            seen["armed"] = False
            seen["failures"] += 1
            seen["mid_write"] = store_checksum(dag_settings.store_url)
            raise RuntimeError("injected failure in the pair write")

    sa.event.listen(sa.Engine, "after_cursor_execute", inject)
    try:
        yield seen
    finally:
        sa.event.remove(sa.Engine, "after_cursor_execute", inject)


def test_a_failed_pair_write_is_invisible_and_its_retry_completes(
    dagbag: Any, dag_settings: Settings, failing_first_pair_write: dict[str, Any]
) -> None:
    settings = dag_settings
    first = EventLog(settings.world_dir()).start + HOUR
    run_hour(settings, first, CONF, clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))
    previous = store_checksum(settings.store_url)
    failing_first_pair_write["armed"] = True
    dag = dagbag.dags["solaris_precompute"]
    dag.task_dict["write_pairs"].retry_delay = timedelta(0)
    try:
        dag_run = dag.test(logical_date=first + timedelta(hours=1), run_conf=CONF)
    finally:
        dag.task_dict["write_pairs"].retry_delay = dag.default_args["retry_delay"]

    assert failing_first_pair_write["failures"] == 1
    mid_write = failing_first_pair_write["mid_write"]
    # The run record moved to "running" and the hour's counters were written by the step before; every tier a
    # reader serves from is as before.
    before_this_run = ("precompute_runs", "exposure_counts")
    assert {t: v for t, v in mid_write.items() if t not in before_this_run} == {
        t: v for t, v in previous.items() if t not in before_this_run
    }
    assert dag_run.state == "success"
    assert _task_tries(dag_run)["write_pairs"] == ("success", 2)
    with open_store(settings.store_url) as store:
        record = store.get_run(run_key(first + timedelta(hours=1)))
    assert record is not None and record.status == "succeeded" and record.counts["pairs_written"] > 0
    assert store_checksum(settings.store_url)["pair_embeddings"][0] > previous["pair_embeddings"][0]


@pytest.mark.parametrize("dag_settings", ["sqlite"], indirect=True)
def test_a_failed_step_fails_the_dag_run_as_well_as_its_record(
    dagbag: Any, dag_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Airflow derives a run's state from its leaves: ``mark_failed``, the only one, must end failed too."""

    def broken(run: Any, settings: Settings) -> None:
        raise RuntimeError("injected failure in count_requests")

    monkeypatch.setattr(nodes, "count_requests", broken)
    dag = dagbag.dags["solaris_precompute"]
    monkeypatch.setattr(dag.task_dict["count_requests"], "retries", 0)
    logical = EventLog(dag_settings.world_dir()).start + HOUR

    dag_run = dag.test(logical_date=logical, run_conf=CONF)

    tries = _task_tries(dag_run)
    assert dag_run.state == "failed", tries
    assert tries["count_requests"][0] == tries["mark_failed"][0] == "failed"
    assert tries["finish"][0] == "upstream_failed"
    record = _record(dag_settings, logical)
    assert record is not None and record.status == "failed"


@pytest.mark.parametrize("dag_settings", ["sqlite"], indirect=True)
def test_a_run_without_a_logical_date_precomputes_the_hour_it_runs_after(dagbag: Any, dag_settings: Settings) -> None:
    """What the REST API's default trigger (``logical_date: null``) creates: a run with no data interval."""
    run_after = EventLog(dag_settings.world_dir()).start + HOUR + timedelta(minutes=20)

    dag_run = dagbag.dags["solaris_precompute"].test(logical_date=None, run_after=run_after, run_conf=CONF)

    assert dag_run.state == "success", _task_tries(dag_run)
    assert dag_run.logical_date is None and dag_run.data_interval_end is None
    record = _record(dag_settings, run_after)
    assert record is not None and record.status == "succeeded"
    assert record.interval_start == run_after.replace(minute=0)


def test_an_hour_without_events_skips_every_step_after_counting_requests(dagbag: Any, dag_settings: Settings) -> None:
    """Nothing before the hour to guess candidates from: the run says so instead of succeeding with zeros.

    Airflow has no "skipped" state for a DAG run, so the run is a success whose writing tasks are skipped.
    """
    hour = EventLog(dag_settings.world_dir()).end.replace(minute=0) + timedelta(hours=48)

    dag_run = dagbag.dags["solaris_precompute"].test(logical_date=hour, run_conf=CONF)

    tries = _task_tries(dag_run)
    assert dag_run.state == "success", tries
    measured = ("hour_counts", "coverage", "shadow_coverage")
    assert [tries[name][0] for name in measured] == ["success"] * 3 and tries["count_requests"][0] == "skipped"
    after = set(PRECOMPUTE.names) - {*measured, "count_requests"} | {"finish", "mark_failed"}
    assert {name: tries[name][0] for name in after} == dict.fromkeys(after, "skipped")
    record = _record(dag_settings, hour)
    assert record is not None and record.status == "skipped" and record.counts == {}
