"""History lookup, exposure counts and user aggregates against brute-force references on random logs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from solaris.models.features import US_PER_HOUR, HistoryIndex, IdTable, base_matrix
from solaris.models.vm_data import user_aggregate


@pytest.fixture
def log_table(make_impressions: Callable[..., pa.Table]) -> pa.Table:
    return make_impressions(np.random.default_rng(7))


def columns(table: pa.Table) -> dict[str, np.ndarray]:
    out = {k: table[k].to_numpy() for k in ("user_id", "item_id", "click")}
    out["ts"] = table["ts"].cast(pa.int64()).to_numpy()
    return out


def test_history_is_the_last_n_strictly_before_ts_most_recent_first(log_table: pa.Table) -> None:
    index, c = HistoryIndex.from_table(log_table), columns(log_table)
    queries_u = np.array([0, 1, 2, 3, 4, 5, 9])
    queries_t = np.array([0, 5 * US_PER_HOUR, 12 * US_PER_HOUR, 20 * US_PER_HOUR, c["ts"].max() + 1, 1, 10**12])
    n = 7
    history = index.lookup(queries_u, queries_t, n)
    for row, (u, t) in enumerate(zip(queries_u, queries_t, strict=True)):
        past = np.flatnonzero((c["user_id"] == u) & (c["ts"] < t))
        expected_ts = np.sort(c["ts"][past])[::-1][:n]
        valid = history.item[row] >= 0
        assert valid.sum() == len(expected_ts)
        gaps = np.expm1(history.gap[row][valid]) * US_PER_HOUR
        np.testing.assert_allclose(t - gaps, expected_ts, atol=2)
        # Every returned slot is a real past impression of this user (item and click agree).
        for item, click in zip(history.item[row][valid], history.click[row][valid], strict=True):
            assert ((c["item_id"][past] == item) & (c["click"][past] == click)).any()


def test_served_counters_are_those_at_the_start_of_the_hour(log_table: pa.Table) -> None:
    """The store's counters are written at the hour's start; training must rebuild those, not the ones at ts."""
    index = HistoryIndex.from_table(log_table)
    users, items = np.array([0, 1, 2, 5]), np.array([0, 4, 2, 1])
    ts = np.array([30, 40, 47, 10]) * US_PER_HOUR + US_PER_HOUR // 2
    np.testing.assert_array_equal(
        index.served_exposure(users, items, ts), index.exposure_raw(users, items, ts // US_PER_HOUR * US_PER_HOUR)
    )
    assert (index.served_exposure(users, items, ts) != index.exposure_raw(users, items, ts)).any()


def test_exposure_counts_match_a_brute_force_count(log_table: pa.Table) -> None:
    index, c = HistoryIndex.from_table(log_table), columns(log_table)
    users, items = np.array([0, 1, 2, 5]), np.array([0, 4, 2, 1])
    ts = np.array([30, 40, 47, 10]) * US_PER_HOUR // 2
    counts = np.expm1(index.exposure_counts(users, items, ts)).round()
    for row in range(len(users)):
        expected = []
        for who in ("user", "pair"):
            mine = c["user_id"] == users[row]
            if who == "pair":
                mine &= c["item_id"] == items[row]
            for hours in (6, 24, 72):
                window = (c["ts"] < ts[row]) & (c["ts"] >= ts[row] - hours * US_PER_HOUR)
                expected.append((mine & window).sum())
        np.testing.assert_array_equal(counts[row], expected)


def test_user_aggregate_is_the_24h_mean_of_earlier_codes() -> None:
    rng = np.random.default_rng(3)
    users = rng.integers(0, 4, 200)
    ts = rng.integers(0, 72, 200) * US_PER_HOUR
    codes = rng.normal(size=(200, 3)).astype(np.float32)
    targets = rng.random(200) < 0.5
    mean, flag = user_aggregate(users, ts, codes, targets)
    for k, row in enumerate(np.flatnonzero(targets)):
        window = (users == users[row]) & (ts < ts[row]) & (ts >= ts[row] - 24 * US_PER_HOUR)
        assert flag[k] == float(window.any())
        expected = codes[window].mean(axis=0) if window.any() else np.zeros(3)
        np.testing.assert_allclose(mean[k], expected, atol=1e-5)


def test_id_table_maps_unknown_ids_to_row_zero_and_shifts_categories() -> None:
    table = IdTable.from_table(
        pa.table({"item_id": pa.array([0, 2], pa.int64()), "i_cat": pa.array([3, 0], pa.int32())}), "item_id", "i_"
    )
    np.testing.assert_array_equal(table.rows(np.array([0, 1, 2, 3, -1])), [1, 2, 3, 0, 0])
    np.testing.assert_array_equal(table.features[table.rows(np.array([0, 2]))][:, 0], [4, 1])
    assert table.cardinalities == (5,)


def test_ids_beyond_float32_precision_are_refused() -> None:
    with pytest.raises(ValueError, match="user_id: id 16777216"):
        base_matrix(np.array([2**24]), np.array([1]), np.array([0]), np.array([0]))
