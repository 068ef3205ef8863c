from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.parquet as pq
import pytest

from solaris.data import hourly
from solaris.data.schema import IMPRESSIONS

T0 = datetime(2026, 1, 5, 22, tzinfo=UTC)  # spans a day boundary


def _impressions(hours: int, per_hour: int) -> pa.Table:
    ts = [T0 + timedelta(hours=h, minutes=59 * i // per_hour) for h in range(hours) for i in range(per_hour)]
    n = len(ts)
    return pa.table(
        {
            "request_id": list(range(n)),
            "ts": pa.array(ts, type=IMPRESSIONS.field("ts").type),
            "user_id": [i % 7 for i in range(n)],
            "item_id": [i % 11 for i in range(n)],
            "position": [0] * n,
            "click": [i % 2 for i in range(n)],
            "conversion": [0] * n,
        },
        schema=IMPRESSIONS,
    )


def test_partitions_are_hive_style_by_hour(tmp_path: Path) -> None:
    written = hourly.write_hourly(_impressions(4, 5), tmp_path)
    assert written == [T0 + timedelta(hours=h) for h in range(4)]
    assert (tmp_path / "dt=2026-01-05" / "hour=22" / "part-0.parquet").exists()
    assert (tmp_path / "dt=2026-01-06" / "hour=01" / "part-0.parquet").exists()
    assert hourly.available_hours(tmp_path) == written


def test_rows_out_of_time_order_land_in_their_hours_in_their_order(tmp_path: Path) -> None:
    table = _impressions(3, 4)
    shuffled = table.take(pa.array([5, 0, 11, 6, 1, 10, 2, 7, 3, 9, 4, 8]))  # hours 1 0 2 1 0 2 0 1 0 2 0 2
    assert hourly.write_hourly(shuffled, tmp_path) == [T0 + timedelta(hours=h) for h in range(3)]
    for h, ids in enumerate(([0, 1, 2, 3], [5, 6, 7, 4], [11, 10, 9, 8])):
        got = pq.read_table(hourly.partition_dir(tmp_path, T0 + timedelta(hours=h)) / "part-0.parquet")
        assert got["request_id"].to_pylist() == ids


def test_range_read_returns_exactly_the_hours_asked(tmp_path: Path) -> None:
    hourly.write_hourly(_impressions(6, 5), tmp_path)
    start, end = T0 + timedelta(hours=1), T0 + timedelta(hours=4)
    table = hourly.read_range(tmp_path, start, end, IMPRESSIONS)
    got_hours = {hourly.floor_hour(t) for t in table["ts"].to_pylist()}
    assert got_hours == {T0 + timedelta(hours=h) for h in (1, 2, 3)}
    assert table.num_rows == 15
    # sub-hour bounds filter rows, not just partitions
    partial = hourly.read_range(tmp_path, start + timedelta(minutes=30), end, IMPRESSIONS)
    assert all(t >= start + timedelta(minutes=30) for t in partial["ts"].to_pylist())
    assert 0 < partial.num_rows < 15


def test_range_read_opens_only_requested_partitions(tmp_path: Path) -> None:
    hourly.write_hourly(_impressions(3, 2), tmp_path)
    # a corrupt file outside the range must not be touched by a read of another hour
    bad = hourly.partition_dir(tmp_path, T0 + timedelta(hours=2)) / "part-0.parquet"
    bad.write_bytes(b"not parquet")
    table = hourly.read_range(tmp_path, T0, T0 + timedelta(hours=2), IMPRESSIONS)
    assert table.num_rows == 4


def test_empty_range_and_columns(tmp_path: Path) -> None:
    hourly.write_hourly(_impressions(2, 3), tmp_path)
    empty = hourly.read_range(tmp_path, T0 + timedelta(days=3), T0 + timedelta(days=4), IMPRESSIONS, ["user_id"])
    assert empty.num_rows == 0 and empty.column_names == ["user_id"]


def test_rewrite_same_part_replaces_and_other_part_appends(tmp_path: Path) -> None:
    table = _impressions(1, 4)
    hourly.write_hourly(table, tmp_path)
    hourly.write_hourly(table, tmp_path)
    assert hourly.read_range(tmp_path, T0, T0 + timedelta(hours=1), IMPRESSIONS).num_rows == 4
    hourly.write_hourly(table, tmp_path, part="part-1")
    assert hourly.read_range(tmp_path, T0, T0 + timedelta(hours=1), IMPRESSIONS).num_rows == 8
    assert not list(tmp_path.rglob("*.tmp"))


def test_iter_hours_streams_one_hour_at_a_time(tmp_path: Path) -> None:
    hourly.write_hourly(_impressions(3, 4), tmp_path)
    chunks = list(hourly.iter_hours(tmp_path, T0, T0 + timedelta(hours=3), IMPRESSIONS))
    assert [h for h, _ in chunks] == [T0 + timedelta(hours=h) for h in range(3)]
    assert all(t.num_rows == 4 for _, t in chunks)


def test_an_airflow_time_becomes_a_plain_utc_time_that_stays_aware() -> None:
    import pendulum

    t = hourly.as_utc(pendulum.datetime(2026, 1, 7, 3, 30, tz="Europe/Paris"))
    assert type(t) is datetime and t == datetime(2026, 1, 7, 2, 30, tzinfo=UTC)
    assert (t - timedelta(hours=30)).tzinfo is not None and hourly.floor_hour(t).tzinfo is not None


def test_naive_time_is_refused(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="no timezone"):
        hourly.read_range(tmp_path, datetime(2026, 1, 5), datetime(2026, 1, 6), IMPRESSIONS)


def test_columns_named_no_dictionary_are_written_plain(tmp_path: Path) -> None:
    hourly.write_hourly(_impressions(1, 20), tmp_path, no_dictionary=("user_id",))
    (path,) = tmp_path.rglob("*.parquet")
    meta = pq.ParquetFile(path).metadata.row_group(0)
    encodings = {meta.column(i).path_in_schema: meta.column(i).encodings for i in range(meta.num_columns)}
    assert "RLE_DICTIONARY" not in encodings["user_id"] and "RLE_DICTIONARY" in encodings["item_id"]
    assert pq.read_table(path).column("user_id").to_pylist() == _impressions(1, 20).column("user_id").to_pylist()


def test_a_folder_without_an_event_log_is_an_error_not_an_empty_range(tmp_path: Path) -> None:
    """A worker given the wrong data folder must fail, not embed pairs from no history."""
    from solaris.data.eventlog import EventLog

    hourly.write_hourly(_impressions(2, 3), tmp_path / "log" / "impressions")
    log = EventLog(tmp_path / "log")  # hours on disk, but no meta.json: not a log anyone generated
    for read in (log.impressions, log.requests):
        with pytest.raises(FileNotFoundError, match="is not an event log"):
            read(T0, T0 + timedelta(hours=2))


def test_a_scan_yields_the_range_reads_rows_in_batches(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """Sub-hour bounds cut rows as the range read does; batches of 3 rows, the asked columns only."""
    monkeypatch.setattr(hourly, "SCAN_BATCH_ROWS", 3)
    hourly.write_hourly(_impressions(6, 5), tmp_path)
    start, end = T0 + timedelta(hours=1, minutes=30), T0 + timedelta(hours=4)
    batches = list(hourly.scan_range(tmp_path, start, end, ["user_id", "item_id"]))
    assert max(b.num_rows for b in batches) == 3 and batches[0].schema.names == ["user_id", "item_id"]
    scanned = pa.Table.from_batches(batches)
    read = hourly.read_range(tmp_path, start, end, IMPRESSIONS, ["user_id", "item_id"])
    assert 0 < scanned.num_rows < 15 and scanned.to_pylist() == read.to_pylist()
