"""Hour-partitioned Parquet: ``<dataset>/dt=YYYY-MM-DD/hour=HH/<part>.parquet``.

Reads name the hours they need and open only those files, so the cost of a time-range read grows with the
range, not with the log. Every file is written to a temporary name and renamed into place, so a reader never
sees half a file.
"""

from __future__ import annotations

import os
import uuid
from collections.abc import Collection, Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq

HOUR = timedelta(hours=1)
SCAN_BATCH_ROWS = 65_536  # rows a batch of scan_range


def as_utc(t: datetime) -> datetime:
    """Logical times must be timezone-aware; a naive one is ambiguous, so it is refused. The answer is a plain
    ``datetime`` whatever came in: Airflow hands over pendulum's, and a pendulum time moved to the stdlib's UTC
    turns naive under arithmetic (``- timedelta`` drops its zone), which a scheduled training run hit."""
    if t.tzinfo is None:
        raise ValueError(f"time {t.isoformat()} has no timezone; pass a UTC-aware datetime")
    u = t.astimezone(UTC)
    return datetime(u.year, u.month, u.day, u.hour, u.minute, u.second, u.microsecond, tzinfo=UTC)


def floor_hour(t: datetime) -> datetime:
    return as_utc(t).replace(minute=0, second=0, microsecond=0)


def hours_between(start: datetime, end: datetime) -> list[datetime]:
    """The hour partitions that overlap ``[start, end)``."""
    first, end = floor_hour(start), as_utc(end)
    n = max(0, int(np.ceil((end - first) / HOUR)))
    return [first + i * HOUR for i in range(n)]


def partition_dir(dataset_dir: Path, hour: datetime) -> Path:
    hour = floor_hour(hour)
    return Path(dataset_dir) / f"dt={hour:%Y-%m-%d}" / f"hour={hour:%H}"


def available_hours(dataset_dir: Path) -> list[datetime]:
    """Hours that hold at least one file, in order."""
    hours = []
    for day in sorted(Path(dataset_dir).glob("dt=*")):
        for hour_dir in sorted(day.glob("hour=*")):
            if any(hour_dir.glob("*.parquet")):
                stamp = f"{day.name[3:]}T{hour_dir.name[5:]}:00:00+00:00"
                hours.append(datetime.fromisoformat(stamp))
    return hours


def write_table_atomic(table: pa.Table, path: Path, no_dictionary: Collection[str] = ()) -> None:
    """``no_dictionary``: columns of floats, where dictionary encoding costs CPU and saves nothing."""
    path.parent.mkdir(parents=True, exist_ok=True)
    tmp = path.with_name(f".{path.name}.{uuid.uuid4().hex}.tmp")
    dictionary = [c for c in table.column_names if c not in no_dictionary] if no_dictionary else True
    try:
        pq.write_table(table, tmp, compression="zstd", use_dictionary=dictionary)
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_hourly(
    table: pa.Table, dataset_dir: Path, part: str = "part-0", no_dictionary: Collection[str] = ()
) -> list[datetime]:
    """Split ``table`` by the hour of its ``ts`` column and write one file per hour.

    Writing the same ``part`` name again replaces that hour's file (an idempotent rerun); distinct part
    names append. Returns the hours written.
    """
    if table.num_rows == 0:
        return []
    micros = pc.cast(table["ts"], pa.int64()).to_numpy()
    hour_keys = micros // 3_600_000_000
    # Rows in time order (a log as it is written) are cut into slices: a take copies every column, and on the
    # served log's tables of many small chunks it was a third of its writer's CPU (bench_serving).
    in_order = bool(np.all(hour_keys[1:] >= hour_keys[:-1]))
    order = None if in_order else np.argsort(hour_keys, kind="stable")
    sorted_keys = hour_keys if order is None else hour_keys[order]
    bounds = (np.flatnonzero(np.diff(sorted_keys)) + 1).tolist()
    written = []
    for start, stop in zip([0, *bounds], [*bounds, len(sorted_keys)], strict=True):
        hour = datetime.fromtimestamp(int(sorted_keys[start]) * 3600, tz=UTC)
        rows = table.slice(start, stop - start) if order is None else table.take(pa.array(order[start:stop]))
        write_table_atomic(rows, partition_dir(dataset_dir, hour) / f"{part}.parquet", no_dictionary)
        written.append(hour)
    return written


def scan_range(
    dataset_dir: Path, start: datetime, end: datetime, columns: list[str] | None = None
) -> Iterator[pa.RecordBatch]:
    """The rows of :func:`read_range` in batches of at most :data:`SCAN_BATCH_ROWS`, a file at a time, for a
    reader that keeps few of them: Arrow's dataset scan decodes whole row groups, several at once, and took
    three times an hour's table to read a million users' codes of that hour."""
    start, end = as_utc(start), as_utc(end)
    wanted = None if columns is None else list(dict.fromkeys([*columns, "ts"]))
    for file in range_files(dataset_dir, start, end):
        for batch in pq.ParquetFile(file).iter_batches(SCAN_BATCH_ROWS, columns=wanted, use_threads=False):
            kind = batch.schema.field("ts").type
            ts = batch["ts"]
            inside = pc.and_(pc.greater_equal(ts, pa.scalar(start, kind)), pc.less(ts, pa.scalar(end, kind)))
            batch = batch.filter(inside)
            yield batch if columns is None else batch.select(columns)


def range_files(dataset_dir: Path, start: datetime, end: datetime) -> list[Path]:
    """The Parquet files of the hour partitions ``[start, end)`` touches, in hour order."""
    return [f for hour in hours_between(start, end) for f in sorted(partition_dir(dataset_dir, hour).glob("*.parquet"))]


def read_range(
    dataset_dir: Path,
    start: datetime,
    end: datetime,
    schema: pa.Schema,
    columns: list[str] | None = None,
    user_ids: np.ndarray | None = None,
) -> pa.Table:
    """Rows with ``start <= ts < end``, opening only the partitions of those hours; of ``user_ids`` only, if
    given, filtered as the files are scanned, so the other users' rows are never held."""
    start, end = as_utc(start), as_utc(end)
    files = [str(f) for f in range_files(dataset_dir, start, end)]
    if not files:
        return schema.empty_table().select(columns or schema.names)
    ts = ds.field("ts")
    window = (ts >= pa.scalar(start, type=schema.field("ts").type)) & (
        ts < pa.scalar(end, type=schema.field("ts").type)
    )
    if user_ids is not None:
        window &= ds.field("user_id").isin(pa.array(np.unique(np.asarray(user_ids, np.int64))))
    return ds.dataset(files, schema=schema, format="parquet").to_table(columns=columns, filter=window)


def prune_hours(dataset_dir: Path, before: datetime, files: str) -> int:
    """Delete the files matching ``files`` (a name or a glob) in every hour partition that ends by ``before``;
    returns how many went.

    Each file is unlinked whole: a reader that opened it before keeps reading it, one that comes later
    finds no file for that hour (an empty hour), never half of one. Emptied ``hour=``/``dt=`` folders go
    too. A rerun finds nothing left to remove and returns 0.
    """
    before = as_utc(before)
    removed = 0
    for day in sorted(Path(dataset_dir).glob("dt=*")):
        for hour_dir in sorted(day.glob("hour=*")):
            hour = _hour_of(day.name, hour_dir.name)
            if hour is None or hour + HOUR > before:
                continue
            for file in sorted(hour_dir.glob(files)):
                try:
                    file.unlink()
                    removed += 1
                except FileNotFoundError:  # a concurrent prune got there first
                    pass
            _remove_if_empty(hour_dir)
        _remove_if_empty(day)
    return removed


def _hour_of(day: str, hour: str) -> datetime | None:
    """The hour a ``dt=YYYY-MM-DD``/``hour=HH`` folder pair names; None for a folder not written here."""
    try:
        return datetime.strptime(f"{day[3:]} {hour[5:]}", "%Y-%m-%d %H").replace(tzinfo=UTC)
    except ValueError:
        return None


def _remove_if_empty(folder: Path) -> None:
    try:
        folder.rmdir()
    except OSError:  # not empty (a stray file, a writer's temporary file) or already gone: leave it
        pass


def iter_hours(
    dataset_dir: Path,
    start: datetime,
    end: datetime,
    schema: pa.Schema,
    columns: list[str] | None = None,
) -> Iterator[tuple[datetime, pa.Table]]:
    """Stream ``[start, end)`` one hour at a time, for loaders that must not hold the whole span."""
    for hour in hours_between(start, end):
        lo, hi = max(hour, as_utc(start)), min(hour + HOUR, as_utc(end))
        table = read_range(dataset_dir, lo, hi, schema, columns)
        if table.num_rows:
            yield hour, table
