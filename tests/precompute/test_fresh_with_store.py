"""The freshness checks against the real feature store's ``fresh_pairs``, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import datetime, timedelta
from functools import partial
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from precompute_logs import T0, LogFactory

from solaris.precompute.fm_pool import drop_still_fresh, requeue_misses
from solaris.store import FeatureStore, open_store

START = T0 + timedelta(hours=24)
HOUR = timedelta(hours=1)


@pytest.fixture(params=["sqlite", pytest.param("postgresql", marks=pytest.mark.postgres)])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[FeatureStore]:
    if request.param == "sqlite":
        url = f"sqlite:///{tmp_path / 'store.db'}"
    else:
        url = request.getfixturevalue("pg_url")
    opened = open_store(url, init=True)
    try:
        yield opened
    finally:
        opened.close()


def write_pair(store: FeatureStore, version: str, pair: tuple[int, int], created: datetime, ttl: timedelta) -> None:
    users, items, vectors, scores = np.array([pair[0]]), np.array([pair[1]]), np.ones((1, 4)), np.array([0.5])
    store.write_pair_embeddings(
        "run1", version, users, items, vectors, scores, created_at=created, expires_at=created + ttl
    )


def test_skips_pairs_fresh_past_until_and_requeues_last_hours_misses(store: FeatureStore, make_log: LogFactory) -> None:
    version = store.register_embedding_version("3", "2", 4, created_at=T0)
    # (1, 10) lasts until START + 3 h; (1, 11) expires at START + 30 min, before the interval ends.
    write_pair(store, version, (1, 10), created=START - HOUR, ttl=4 * HOUR)
    write_pair(store, version, (1, 11), created=START - HOUR, ttl=timedelta(minutes=90))
    fresh = partial(store.fresh_pairs, version)

    pool = pd.DataFrame({"user_id": [1, 1, 2], "item_id": [10, 11, 10]})
    kept = drop_still_fresh(pool, fresh, until=START + HOUR)
    assert set(zip(kept["user_id"], kept["item_id"], strict=True)) == {(1, 11), (2, 10)}

    log = make_log([(START - timedelta(minutes=20), 1, [10, 11, 12]), (START - 3 * HOUR, 2, [10])])
    queued = requeue_misses(log, START, fresh)
    assert set(zip(queued["user_id"], queued["item_id"], strict=True)) == {(1, 12)}
