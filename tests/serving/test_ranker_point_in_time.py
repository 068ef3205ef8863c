"""The ranker serves as of ``at``: a row created after it feeds no score (issue #17, item 6)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np
from conftest import StoreFactory, T, lay_out

from solaris.serving import Ranker
from solaris.serving.champion import ServingModel


def test_a_row_created_after_at_is_served_as_tier_none(make_store: StoreFactory, champion: ServingModel) -> None:
    layout = lay_out(make_store(), champion, created=T)  # every row created at T, fresh until T + TTL
    ranker = Ranker(layout.store, champion)
    users, items = np.array([1, 1, 2, 2]), np.array([10, 11, 20, 30])
    positions = np.zeros(4, np.int64)
    try:
        for at in (datetime(1, 1, 1, tzinfo=UTC), T - timedelta(microseconds=1)):
            ts = np.full(4, (at - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1), np.int64)
            early = ranker.serve(users, items, ts, positions, at)
            assert early.tier_names() == ["none"] * 4, at
        ts = np.full(4, (T - datetime(1970, 1, 1, tzinfo=UTC)) // timedelta(microseconds=1), np.int64)
        assert ranker.serve(users, items, ts, positions, T).tier_names() == ["pair", "agg", "knn", "none"]
    finally:
        ranker.close()
