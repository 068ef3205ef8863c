"""A failed run's staging stays for its retry, and goes once its hour is past the code log's retention."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa

from solaris.precompute.staging import Staging, expire_failed_staging
from solaris.store import SqliteStoreConfig, open_store

T0 = datetime(2026, 11, 2, tzinfo=UTC)
H = timedelta(hours=1)


def test_only_failed_runs_before_the_retention_lose_their_staging(tmp_path: Path) -> None:
    root = str(tmp_path / "staging")
    runs = {
        "old-failed": (0, "failed"),
        "old-running": (1, None),
        "old-succeeded": (2, "succeeded"),
        "new-failed": (50, "failed"),
    }
    with open_store(SqliteStoreConfig(tmp_path / "store.db"), init=True) as store:
        version = store.register_embedding_version("1", "1", 8, created_at=T0)
        for run_id, (hour, status) in runs.items():
            start = T0 + hour * H
            store.start_run(run_id, start, start + H, "1", "1", "1", version, start)
            if status is not None:
                store.finish_run(run_id, status, {}, {}, start + H)
            Staging(root, run_id).write("selected", pa.table({"x": [1]}))

        assert expire_failed_staging(store, root, T0 + 48 * H) == 1
        assert expire_failed_staging(store, root, T0 + 48 * H) == 0  # nothing left to do

    kept = {run_id for run_id in runs if Staging(root, run_id).exists()}
    assert kept == {"old-running", "old-succeeded", "new-failed"}  # a running run and a recent failure keep theirs
