"""The hour split among user shards writes what the unsplit hour writes, on both backends."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest
from precompute_env import backend_settings, precompute_settings
from store_state import store_checksum

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.embedding_version import parse_embedding_version
from solaris.precompute import run_files
from solaris.precompute.run import run_hour
from solaris.precompute.scorelog import ScoreLog
from solaris.store import open_store
from solaris.training.jobs import TrainReport, World

# A budget well under the pool, so that the cut falls inside every shard's ranking.
PARAMS = {"shards": 2, "batch_size": 2048, "device": "cpu", "selector": "budget", "fm_budget": 400}
SHARDED = 5


def fixed_clock() -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC)


def score_log(settings: Settings, run_key: str) -> ScoreLog:
    with open_store(settings.store_url) as store:
        record = store.get_run(run_key)
    assert record is not None
    version = record.embedding_version
    return run_files.code_log_of(settings, version, parse_embedding_version(version).dim).score_log


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def twins(
    request: pytest.FixtureRequest, trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> tuple[Settings, Settings]:
    """Two stores of the test's own on the parametrized backend, over the session's world and models."""
    return (
        backend_settings(request, trained[0], tmp_path / "whole", f"{tmp_path.name}_whole"),
        backend_settings(request, trained[0], tmp_path / "sharded", f"{tmp_path.name}_sharded"),
    )


def test_the_sharded_and_the_unsharded_hour_write_identical_stores(twins: tuple[Settings, Settings]) -> None:
    """Two hours (the second re-queues the first's misses and keeps its fresh pairs) at 1 and 5 user shards:
    every table alike, the run records' counts included, the same quality figures of the hour past (the second
    hour's are of pairs the first wrote); the score log holds the same rows."""
    whole, sharded = twins
    start = EventLog(whole.world_dir()).start + timedelta(hours=30)
    for hour in (start, start + timedelta(hours=1)):
        one = run_hour(whole, hour, PARAMS, clock=fixed_clock)
        split = run_hour(sharded, hour, PARAMS | {"user_shards": SHARDED}, clock=fixed_clock)
        assert split["counts"] == one["counts"] and one["counts"]["selected"] == PARAMS["fm_budget"]
        assert split["quality"] == one["quality"]  # each shard counted its users, the counts added up
    assert one["counts"]["requeued"] > 0 and one["counts"]["eligible"] > PARAMS["fm_budget"]
    assert one["quality"]["coverage_pair"] > 0 and one["quality"]["previous_hits"] > 0
    assert store_checksum(sharded.store_url) == store_checksum(whole.store_url)
    logs = [score_log(s, one["run_key"]).read(start, start + timedelta(hours=2)) for s in twins]
    rows = [sorted(zip(x.user_ids, x.item_ids, x.scores, x.selected, strict=True)) for x in logs]
    assert rows[0] == rows[1] and sum(r[3] for r in rows[0]) == 2 * PARAMS["fm_budget"]
    assert len(list(score_log(sharded, one["run_key"]).path.rglob("scores-*.parquet"))) == 2 * SHARDED


def test_a_rerun_with_fewer_user_shards_leaves_no_stale_part(
    trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    """The hour's score log is cleared before its shards write: a rerun at 2 shards after 5 keeps 2 parts."""
    settings = precompute_settings(trained[0], tmp_path)
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    run_hour(settings, start, PARAMS | {"user_shards": SHARDED}, clock=fixed_clock)
    done = run_hour(settings, start, PARAMS | {"user_shards": 2}, clock=fixed_clock)
    scores = score_log(settings, done["run_key"])
    assert sorted(p.name for p in scores.path.rglob("*.parquet")) == ["scores-0.parquet", "scores-1.parquet"]
    assert int(np.sum(scores.read(start, start + timedelta(hours=1)).selected)) == PARAMS["fm_budget"]
