"""Chaos run (issue #17): the process running ``embed_shard`` is SIGKILLed mid-run, then the hour is retried.

A hard death leaves what no ``except`` clause can tidy: the run record still ``running``, the staging folder
with the tables of the steps that finished (shard 0's codes among them), and nothing in the store a reader
could see. The retry must end with the store exactly as one clean run of the hour leaves it.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import textwrap
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow.parquet as pq
import pytest
from precompute_env import LEAD, precompute_settings
from store_state import store_checksum

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.embedding_version import parse_embedding_version
from solaris.precompute import run_files
from solaris.precompute.run import run_hour
from solaris.precompute.spec import run_key
from solaris.precompute.staging import Staging
from solaris.store import open_store
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World

pytestmark = pytest.mark.slow

PARAMS = {"shards": 2, "batch_size": 2048, "device": "cpu"}
FIRST_HOUR = timedelta(hours=30)  # as in test_hourly_run: a day of history before the first run
CLOCK = datetime(2030, 1, 1, tzinfo=UTC)
REPO = Path(__file__).resolve().parents[2]

# The child: run the hour with ``nodes.embed_shard`` wrapped so that shard 1, once shard 0 has staged its
# codes, SIGKILLs its own process in the middle of its work (models loaded, history indexed, FM not yet run).
CHILD = textwrap.dedent(
    """
    import os, signal, sys
    from datetime import UTC, datetime
    from pathlib import Path

    from solaris.config import Settings
    from solaris.precompute import embedding, nodes, run_files
    from solaris.precompute.run import run_hour

    original = nodes.embed_shard

    def embed_then_die(run, settings, shard):
        if shard == 1:
            staged = Path(run_files.staging(settings, run).path) / "codes-0.parquet"
            if not staged.exists():
                sys.exit(f"shard 0 staged no codes at {staged}")

            def die(*args, **kwargs):
                print("shard 1: SIGKILL", flush=True)
                os.kill(os.getpid(), signal.SIGKILL)

            embedding.embed_codes = die  # embed_shard imports it when called
        return original(run, settings, shard)

    nodes.embed_shard = embed_then_die
    params = {"shards": 2, "batch_size": 2048, "device": "cpu"}
    clock = lambda: datetime(2030, 1, 1, tzinfo=UTC)
    run_hour(Settings.from_env(), datetime.fromisoformat(sys.argv[1]), params, clock=clock)
    sys.exit("the run finished: the kill never happened")
    """
)


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def two_stores(
    request: pytest.FixtureRequest, trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> tuple[Settings, Settings]:
    """Two fresh homes and stores on one backend: A for the clean run, B for the killed one and its retry."""
    made = []
    for name in ("a", "b"):
        url = None
        if request.param == "postgres":
            schema = f"kill_{name}_{tmp_path.name.lower().replace('-', '_')[-40:]}"
            url = request.getfixturevalue("pg_url") + f"?schema={schema}"
        made.append(precompute_settings(trained[0], tmp_path / name, url))
    return made[0], made[1]


def _child_env(settings: Settings) -> dict[str, str]:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLARIS_") or k == "SOLARIS_TEST_PG_URL"}
    return env | settings.as_env()


def _fixed_clock() -> datetime:
    return CLOCK


def test_a_sigkilled_shard_leaves_nothing_visible_and_its_retry_ends_as_a_clean_run(
    two_stores: tuple[Settings, Settings],
) -> None:
    clean, chaos = two_stores
    first = EventLog(clean.world_dir()).start + FIRST_HOUR
    hour = first + timedelta(hours=1)
    version = registry.resolve_champions(registry.connect(clean), LEAD.name).embedding_version
    code_dim = parse_embedding_version(version).dim

    # A: two clean hours. B: the same first hour, so the killed hour faces fresh pairs and re-queued misses.
    run_hour(clean, first, PARAMS, clock=_fixed_clock)
    expected = run_hour(clean, hour, PARAMS, clock=_fixed_clock)
    run_hour(chaos, first, PARAMS, clock=_fixed_clock)
    before_kill = store_checksum(chaos.store_url)
    counts = expected["counts"]
    assert counts["still_fresh"] > 0 and counts["requeued"] > 0 and counts["pairs_written"] > 0

    child = subprocess.run(
        [sys.executable, "-c", CHILD, hour.isoformat()],
        cwd=REPO,
        env=_child_env(chaos),
        capture_output=True,
        text=True,
        timeout=300,
    )

    assert child.returncode == -signal.SIGKILL, (child.returncode, child.stdout, child.stderr[-4000:])
    assert "shard 1: SIGKILL" in child.stdout
    # What the death left behind: an open run record and the staging of the steps that finished.
    with open_store(chaos.store_url) as store:
        record = store.get_run(run_key(hour))
    assert record is not None and record.status == "running" and record.finished_at is None
    staged = Path(Staging(chaos.data_dir / "staging", run_key(hour)).path)
    staged_tables = {
        *(f"{table}-0.parquet" for table in ("hour_counts", "requested_labels", "pool", "scored", "selected")),
        *(f"{table}-0.parquet" for table in ("history", "codes", "exposure_users", "exposure_pairs")),
        "request_stats.parquet",
        "item_listings.parquet",
        "cut.parquet",
    }
    assert {p.name for p in staged.iterdir()} == staged_tables
    shard0 = pq.read_table(staged / "codes-0.parquet")
    assert shard0.num_rows > 0
    # ... and nothing a reader sees: every table but the run records and the hour's counters (a step of its own,
    # done before the shards) is as before, no pair of the hour served.
    mid = store_checksum(chaos.store_url)
    before_the_shards = ("precompute_runs", "exposure_counts")
    assert {t: v for t, v in mid.items() if t not in before_the_shards} == {
        t: v for t, v in before_kill.items() if t not in before_the_shards
    }
    assert mid["precompute_runs"][0] == before_kill["precompute_runs"][0] + 1
    users, items = shard0["user_id"].to_numpy(), shard0["item_id"].to_numpy()
    with open_store(chaos.store_url) as store:
        served = store.read_tiers_batch(version, users, items, hour)
    assert not served.pair_mask.any()
    assert len(run_files.code_log_of(chaos, version, code_dim).read(hour, hour + timedelta(hours=1)).user_ids) == 0

    retried = run_hour(chaos, hour, PARAMS, clock=_fixed_clock)

    assert store_checksum(chaos.store_url) == store_checksum(clean.store_url)
    assert retried["counts"] == expected["counts"]
    with open_store(chaos.store_url) as store:
        record = store.get_run(run_key(hour))
    assert record is not None and record.status == "succeeded" and record.counts == expected["counts"]
    assert not staged.exists() and not any((chaos.data_dir / "staging").iterdir())
    # The code log (the aggregates' source, outside the store) is the clean run's too.
    logged = [run_files.code_log_of(s, version, code_dim).read(hour, hour + timedelta(hours=1)) for s in (clean, chaos)]
    for field in ("user_ids", "item_ids", "scores", "codes"):
        np.testing.assert_array_equal(getattr(logged[1], field), getattr(logged[0], field))
