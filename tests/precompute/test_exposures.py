"""The exposure counters the precompute writes are the ones training rebuilds: read back through the store
at any time of the hour, on both backends, they equal ``HistoryIndex.served_exposure`` over the whole log."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pyarrow as pa
import pytest

from solaris.data.eventlog import EventLog
from solaris.data.synthetic import PRESETS, generate_world
from solaris.exposure import TTL_HOURS, WINDOWS_H
from solaris.models.features import HistoryIndex, ts_micros
from solaris.precompute.embedding import HISTORY_COLUMNS
from solaris.precompute.exposures import LONGEST_H, counts_as_of, exposure_index
from solaris.store import FeatureStore


@pytest.fixture(scope="module")
def log(tmp_path_factory: pytest.TempPathFactory) -> EventLog:
    return generate_world(PRESETS["tiny"], tmp_path_factory.mktemp("exposures") / "world")


def test_counters_served_in_an_hour_are_those_training_rebuilds(
    log: EventLog, make_store: Callable[[], FeatureStore]
) -> None:
    store = make_store()
    at = log.start + timedelta(hours=50)
    version = store.register_embedding_version("1", "1", 4, created_at=log.start)
    store.write_exposure_counts("run", counts_as_of(exposure_index(log, at), at), at, at + timedelta(hours=TTL_HOURS))

    shown = log.impressions(at, at + timedelta(hours=1), HISTORY_COLUMNS + ["position"])
    users, items, ts = shown["user_id"].to_numpy(), shown["item_id"].to_numpy(), ts_micros(shown["ts"])
    read = store.read_tiers_batch(version, users, items, at + timedelta(minutes=59))
    whole = HistoryIndex.from_table(log.impressions(log.start, log.end, HISTORY_COLUMNS))
    expected = whole.served_exposure(users, items, ts)
    assert len(users) > 50 and expected[:, len(WINDOWS_H) :].any()  # pairs shown before: the pair windows count
    np.testing.assert_array_equal(read.exposure, expected)


def test_a_user_whose_windows_emptied_gets_a_row_of_zeros() -> None:
    at = datetime(2026, 1, 10, tzinfo=UTC)
    hours_before = {1: [LONGEST_H + 1], 2: [LONGEST_H + 1, 30, 1]}  # user 1 idle for the longest window
    rows = [(u, at - timedelta(hours=h), 7) for u, hours in hours_before.items() for h in hours]
    table = pa.table(
        {
            "user_id": [r[0] for r in rows],
            "ts": pa.array([r[1] for r in rows], pa.timestamp("us", "UTC")),
            "item_id": [r[2] for r in rows],
            "click": [0] * len(rows),
            "conversion": [0] * len(rows),
        }
    )
    counts = counts_as_of(HistoryIndex.from_table(table), at)
    assert counts.user_ids.tolist() == [1, 2]
    assert counts.user_counts.tolist() == [[0, 0, 0], [1, 1, 2]]  # 6, 24, 72 h before ``at``
    assert list(zip(counts.pair_user_ids, counts.pair_item_ids, strict=True)) == [(2, 7)]
    assert counts.pair_counts.tolist() == [[1, 1, 2]]


def test_the_counters_index_covers_the_longest_window_and_the_ttl(log: EventLog) -> None:
    at = log.start + timedelta(hours=LONGEST_H + TTL_HOURS + 5)
    index = exposure_index(log, at)
    earliest = (at - timedelta(hours=LONGEST_H + TTL_HOURS)).timestamp() * 1e6
    assert index.ts.min() >= earliest and index.ts.max() < at.timestamp() * 1e6
