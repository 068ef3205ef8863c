"""The ad-to-ad tier from the hourly run: every catalogue item gets a list of similar items that some user
has a fresh pair code for, and a read serves (u, i) an A2A value exactly where u holds a code for one of i's
similar items, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pytest

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute.run import run_hour
from solaris.store import FeatureStore, open_store
from solaris.store.codec import decode_lists
from solaris.training.jobs import TrainReport, World

from precompute_env import backend_settings

PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu", "a2a_k": 5}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def a2a_settings(
    request: pytest.FixtureRequest, trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> Settings:
    return backend_settings(request, trained[0], tmp_path, "a2a")


def _rows(store: FeatureStore, sql: str) -> list[tuple]:
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        return [tuple(row) for row in conn.exec_driver_sql(sql)]


def test_a_user_is_served_its_codes_for_similar_items(a2a_settings: Settings) -> None:
    log = EventLog(a2a_settings.world_dir())
    assert log.start + timedelta(hours=30) == HOUR
    done = run_hour(a2a_settings, HOUR, PARAMS, clock=lambda: HOUR)
    t = HOUR + timedelta(minutes=30)
    with open_store(a2a_settings.store_url) as store:
        record = store.get_run(done["run_key"])
        assert record is not None and record.status == "succeeded"
        listed = _rows(store, "SELECT item_id, neighbours FROM item_neighbours")
        pairs = _rows(store, "SELECT user_id, item_id FROM pair_embeddings")
        users = np.unique([u for u, _ in pairs])[:40]
        items = np.arange(log.items().num_rows, dtype=np.int64)
        read = store.read_tiers_batch(
            record.embedding_version, np.repeat(users, len(items)), np.tile(items, len(users)), t
        )

    of_entry, neighbour_ids, sims = decode_lists(b"".join(bytes(b) for _, b in listed), [len(b) // 8 for _, b in listed])
    assert {len(b) // 8 for _, b in listed} == {PARAMS["a2a_k"]}
    links = [(listed[r][0], j, s) for r, j, s in zip(of_entry, neighbour_ids, sims, strict=True) if j >= 0]
    catalogue = set(log.items()["item_id"].to_pylist())
    assert {i for i, _ in listed} == catalogue  # every item has a list, a new one too
    lent = {j for _, j, _ in links}
    assert lent <= {i for _, i in pairs}, "an item nobody holds a code for can lend none"
    similar = {}
    for i, j, s in links:
        if s > 0:
            similar.setdefault(i, set()).add(j)
    held = {}
    for u, i in pairs:
        held.setdefault(u, set()).add(i)
    expected = np.array([bool(similar.get(i, set()) & held[u]) for u in users for i in items])
    np.testing.assert_array_equal(read.a2a_mask, expected)
    # The tier reaches pairs the pair tier does not: its reason to exist.
    assert (read.a2a_mask & ~read.pair_mask).any()
    assert done["counts"]["item_neighbours_written"] == len(catalogue)
