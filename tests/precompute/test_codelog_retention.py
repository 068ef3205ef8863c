"""The code log keeps ``code_log_retention_hours`` of pair codes: the hourly ``expire`` step removes older hours."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from precompute_env import precompute_settings

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.hourly import available_hours
from solaris.precompute import nodes, run_files
from solaris.precompute.codelog import CodeLog
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.run import run_hour
from solaris.precompute.spec import HourRun, UserShard, run_key, shard_of
from solaris.store import open_store
from solaris.training.jobs import TrainReport, World

T = datetime(2026, 3, 3, 5, tzinfo=UTC)
H = timedelta(hours=1)
VERSION, DIM = "fm3-ae2-d4", 4


def _write(log: CodeLog, hour: datetime, n: int = 2) -> None:
    ids = np.arange(n, dtype=np.int64)
    expires = np.full(n, np.datetime64(hour.replace(tzinfo=None) + timedelta(hours=4), "us"))
    log.write_hour(hour, ids, ids + 100, np.ones(n, np.float32), np.ones((n, DIM), np.float32), expires)


def test_prune_removes_the_hours_before_the_cutoff_only_and_is_idempotent(tmp_path: Path) -> None:
    log = CodeLog(tmp_path / "codes", VERSION, DIM)
    hours = [T - i * H for i in range(60)]  # spans three days' dt= folders
    for hour in hours:
        _write(log, hour)

    removed = log.prune(T - 48 * H)

    assert removed == 11  # T-59h .. T-49h
    assert available_hours(log.path) == sorted(h for h in hours if h >= T - 48 * H)
    assert len(log.read(T - 48 * H, T + H).user_ids) == 2 * 49
    assert not (log.path / "dt=2026-02-28").exists()  # a day wholly past the cutoff leaves no folder
    assert all(any(d.iterdir()) for d in log.path.glob("dt=*/hour=*"))  # nor an emptied hour
    assert log.prune(T - 48 * H) == 0  # a rerun finds nothing more to remove
    assert CodeLog(tmp_path / "nothing", VERSION, DIM).prune(T) == 0  # no log yet


def test_an_open_hour_file_stays_readable_while_it_is_pruned(tmp_path: Path) -> None:
    log = CodeLog(tmp_path / "codes", VERSION, DIM)
    _write(log, T - 50 * H, n=3)
    path = next(log.path.glob("dt=*/hour=*/*.parquet"))
    size = path.stat().st_size
    with path.open("rb") as reader:  # a reader that opened the file before the prune reads all of it
        assert log.prune(T - 48 * H) == 1
        assert len(reader.read()) == size
    assert not path.exists() and len(log.read(T - 51 * H, T).user_ids) == 0  # a later reader: an empty hour


def _run(params: PrecomputeParams) -> HourRun:
    return HourRun(run_key(T), T, T + H, "3", "2", "7", "ctr", VERSION, DIM, params)


def test_the_expire_step_prunes_the_code_log_past_its_retention(tmp_path: Path) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    with open_store(settings.store_url, init=True):
        pass
    run = _run(PrecomputeParams(code_log_retention_hours=30))
    log = run_files.code_log(settings, run)
    for i in range(40):
        _write(log, T - i * H)
    other = run_files.code_log_of(settings, "fm9-ae9-d4", DIM)  # another embedding version's log is left alone
    _write(other, T - 39 * H)

    meta = nodes.expire(run, settings)

    assert meta["expired_code_log_hours"] == 9 and isinstance(meta["expired_code_log_hours"], int)
    assert available_hours(log.path) == [T - i * H for i in range(30, -1, -1)]
    assert available_hours(other.path) == [T - 39 * H]
    assert nodes.expire(run, settings)["expired_code_log_hours"] == 0  # a rerun of the hour


def test_the_default_retention_keeps_what_every_reader_of_the_code_log_reads() -> None:
    params = PrecomputeParams()
    assert params.code_log_retention_hours >= max(params.window_hours, params.ttl_hours, 1)
    assert PrecomputeParams(ttl_hours=48).code_log_retention_hours >= 48  # the form's largest TTL


def test_a_retention_shorter_than_a_reader_looks_back_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match=r"code_log_retention_hours must be at least window_hours \(24\)"):
        PrecomputeParams(code_log_retention_hours=12)
    with pytest.raises(ValueError, match=r"code_log_retention_hours must be at least ttl_hours \(8\)"):
        PrecomputeParams(code_log_retention_hours=6, window_hours=6, ttl_hours=8)
    with pytest.raises(ValueError, match=r"code_log_retention_hours must be in \[1, inf\], got 0"):
        PrecomputeParams(code_log_retention_hours=0)
    with pytest.raises(ValueError, match="code_log_retention_hours must be at least window_hours"):
        PrecomputeParams.from_mapping({"window_hours": 72})
    assert PrecomputeParams(code_log_retention_hours=72, window_hours=72).window_hours == 72


@pytest.mark.slow
def test_an_hourly_run_prunes_the_code_log_and_counts_the_hours(
    trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    """Two runs 26 h apart with a 24 h retention: the second removes the first's hour and keeps its own."""
    settings = precompute_settings(trained[0], tmp_path)
    first = EventLog(settings.world_dir()).start + timedelta(hours=30)
    params = {"shards": 1, "device": "cpu", "code_log_retention_hours": 24}

    done = run_hour(settings, first, params, clock=lambda: first)
    (log,) = (settings.data_dir / "precompute" / "codes").iterdir()  # the one embedding version's log
    assert available_hours(log) == [first] and done["counts"]["expired_code_log_hours"] == 0

    later = run_hour(settings, first + timedelta(hours=26), params, clock=lambda: first)

    assert later["counts"]["expired_code_log_hours"] == 1
    assert available_hours(log) == [first + timedelta(hours=26)]


def test_a_user_shards_read_holds_its_users_rows_of_every_hour(tmp_path: Path) -> None:
    """Three shards' reads split the whole read's rows (codes included), each row once, in hour order."""
    log = CodeLog(tmp_path / "codes", VERSION, DIM)
    rng = np.random.default_rng(3)
    for h in range(3):
        ids = rng.permutation(40).astype(np.int64)
        log.write_hour(
            T + h * H,
            ids,
            ids + 100,
            rng.random(40),
            rng.random((40, DIM)),
            np.full(40, np.datetime64("NaT"), "datetime64[us]"),
        )
    whole = log.read(T, T + 3 * H)
    parts = [log.read(T, T + 3 * H, users=UserShard(s, 3)) for s in range(3)]
    assert sum(len(p.user_ids) for p in parts) == len(whole.user_ids) == 120
    for shard, part in enumerate(parts):
        mine = shard_of(whole.user_ids, 3) == shard
        np.testing.assert_array_equal(part.user_ids, whole.user_ids[mine])
        np.testing.assert_array_equal(part.codes, whole.codes[mine])
        np.testing.assert_array_equal(part.created_at, whole.created_at[mine])
    assert log.read(T, T + 3 * H, with_codes=False, users=UserShard(1, 3)).codes.shape == (len(parts[1].user_ids), 0)
