"""The run's target hour, parameters, shards, code log and KNN state: the contracts the DAG relies on."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pendulum
import pytest

from solaris.enrichment.knn import build_neighbours
from solaris.precompute import knn_state
from solaris.precompute.codelog import CodeLog
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.spec import HourRun, NoTargetHour, UserShard, run_key, shard_of, target_interval, target_time

T = datetime(2026, 3, 1, 7, tzinfo=UTC)


def test_target_hour_follows_the_interval_end_as_plain_utc() -> None:
    start, end = target_interval(pendulum.datetime(2026, 3, 1, 7, 59, 59, tz="Europe/Amsterdam"))
    assert (start, end) == (T - timedelta(hours=1), T)
    assert type(start) is datetime and start.tzinfo is UTC
    assert run_key(start + timedelta(minutes=30)) == run_key(start) == "solaris_precompute__2026-03-01T06"
    with pytest.raises(ValueError, match="no timezone"):
        target_interval(datetime(2026, 3, 1, 7))


def test_a_run_without_a_data_interval_is_for_the_hour_it_runs_after() -> None:
    """Airflow 3's REST API triggers without a logical date by default: no data interval, only ``run_after``."""
    asked = pendulum.datetime(2026, 3, 1, 9, 20, tz="UTC")
    assert target_interval(target_time(None, asked)) == (T + timedelta(hours=2), T + timedelta(hours=3))
    assert target_time(T, asked) == T  # a data interval, when there is one, decides
    with pytest.raises(NoTargetHour, match="neither a data interval nor a run_after"):
        target_time(None, None)


def test_params_refuse_unknown_and_out_of_range_values_by_name() -> None:
    with pytest.raises(ValueError, match="unknown precompute parameter.*top_fracion"):
        PrecomputeParams.from_mapping({"top_fracion": 0.3})
    with pytest.raises(ValueError, match=r"shards must be in \[1, 64\], got 0"):
        PrecomputeParams(shards=0)
    with pytest.raises(ValueError, match="top_fraction"):
        PrecomputeParams(top_fraction=1.5)
    with pytest.raises(ValueError, match="device 'tpu'"):
        PrecomputeParams(device="tpu")


def test_a_run_survives_the_xcom_round_trip() -> None:
    run = HourRun(
        run_key(T), T, T + timedelta(hours=1), "3", "2", "7", "ctr", "fm3-ae2-d32", 32, PrecomputeParams(shards=4)
    )
    again = HourRun.from_xcom(run.as_xcom())
    assert again == run and again.expires_at == T + timedelta(hours=4)


def test_shards_are_stable_and_even_over_consecutive_ids() -> None:
    ids = np.arange(100_000)
    shards = shard_of(ids, 4)
    assert np.array_equal(shards, shard_of(ids.copy(), 4))
    counts = np.bincount(shards, minlength=4)
    assert counts.min() > 0.97 * counts.max()
    assert set(np.unique(shard_of(ids, 1))) == {0}


def test_code_log_replaces_an_hour_and_reads_a_window(tmp_path: Path) -> None:
    log = CodeLog(tmp_path, "fm1-ae1-d4", 4)
    rng = np.random.default_rng(0)
    log.write_hour(T, np.arange(5), np.arange(5) + 10, rng.random(5), rng.random((5, 4)), _ttl_later(5, T))
    codes = rng.random((3, 4)).astype(np.float32)
    log.write_hour(T, np.arange(3), np.arange(3), np.ones(3), codes, _ttl_later(3, T))  # a rerun of the hour
    log.write_hour(T + timedelta(hours=1), np.array([9]), np.array([9]), np.ones(1), codes[:1], _ttl_later(1, T))
    read = log.read(T, T + timedelta(hours=1))
    assert read.user_ids.tolist() == [0, 1, 2] and np.array_equal(read.codes, codes)
    assert (read.created_at == np.datetime64(T.replace(tzinfo=None), "us")).all()
    assert len(log.read(T, T + timedelta(hours=2)).user_ids) == 4
    with pytest.raises(ValueError, match=r"codes must be \[2, 4\]"):
        log.write_hour(T, np.arange(2), np.arange(2), np.ones(2), codes, _ttl_later(2, T))


def test_knn_state_round_trip_and_the_newest_earlier_hour(tmp_path: Path) -> None:
    ids = np.arange(20)
    vectors = np.random.default_rng(0).normal(size=(20, 8)).astype(np.float32)
    first, second = UserShard(0, 2), UserShard(1, 2)
    for hour in (T, T + timedelta(hours=1)):
        table = build_neighbours(ids, vectors + hour.hour, 3)
        knn_state.save(tmp_path, hour, first, knn_state.KnnState(table, T))
    knn_state.save(tmp_path, T, second, knn_state.KnnState(table, T))
    assert knn_state.load_before(tmp_path, T, first) is None
    state = knn_state.load_before(tmp_path, T + timedelta(hours=5), first)
    assert state is not None and state.full_built_at == T
    np.testing.assert_array_equal(state.table.neighbour_ids, table.neighbour_ids)
    np.testing.assert_array_equal(state.table.similarities, table.similarities)
    # The newest hour did not get to the second shard: it starts afresh, not from an older hour's rows.
    assert knn_state.load_before(tmp_path, T + timedelta(hours=5), second) is None
    assert knn_state.load_before(tmp_path, T + timedelta(hours=1), second) is not None
    assert knn_state.load_before(tmp_path, T + timedelta(hours=5), UserShard(0, 3)) is None
    knn_state.prune(tmp_path, T + timedelta(hours=1))
    assert knn_state.load_before(tmp_path, T + timedelta(hours=1), second) is None


def _ttl_later(n: int, written: datetime) -> np.ndarray:
    """Expiries as a 4-hour TTL sets them (solaris.precompute.expiry)."""
    return np.full(n, np.datetime64(written.replace(tzinfo=None) + timedelta(hours=4), "us"))
