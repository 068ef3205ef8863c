"""The ad-to-ad tier from the hourly run: every catalogue item gets a list of similar items that some user
has a fresh pair code for, and a read serves (u, i) an A2A value exactly where u holds a code for one of i's
similar items, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from precompute_env import run_succeeded_hour, store_rows

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.store import open_store
from solaris.store.codec import decode_lists

PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu", "a2a_k": 5}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history
READ_AT = HOUR + timedelta(minutes=30)  # the store is read half way through the hour the run served


def test_a_user_is_served_its_codes_for_similar_items(run_settings: Settings) -> None:
    log = EventLog(run_settings.world_dir())
    done, record = run_succeeded_hour(run_settings, HOUR, PARAMS)
    with open_store(run_settings.store_url) as store:
        listed = store_rows(store, "SELECT item_id, neighbours FROM item_neighbours")
        pairs = store_rows(store, "SELECT user_id, item_id FROM pair_embeddings")
        users = np.unique([u for u, _ in pairs])[:40]
        items = np.arange(log.items().num_rows, dtype=np.int64)
        read = store.read_tiers_batch(
            record.embedding_version, np.repeat(users, len(items)), np.tile(items, len(users)), READ_AT
        )

    slots = [len(b) // 8 for _, b in listed]
    neighbour_ids, sims = decode_lists(b"".join(bytes(b) for _, b in listed), slots)
    assert set(slots) == {PARAMS["a2a_k"]}
    of_entry = np.repeat([item for item, _ in listed], slots)
    links = [(i, j, s) for i, j, s in zip(of_entry, neighbour_ids, sims, strict=True) if j >= 0]
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
