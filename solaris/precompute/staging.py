"""A run-scoped staging area for the tables that pass between the tasks of one DAG run.

Task outputs are too large for XCom, so each task writes Parquet here and hands on only the small metadata
dict :meth:`Staging.write` returns. The folder is derived from the DAG run key alone, so a retried or re-run
task writes to the same paths and overwrites its earlier output instead of piling up copies.

The root is a local folder or an object-store URL (``SOLARIS_STAGING_URL``: ``s3://bucket/prefix``, with
``?endpoint_override=host:port&scheme=http`` for an S3-compatible server), opened with pyarrow's own
filesystems: Celery workers on hosts that share no disk hand tables on through the bucket. A table is never
seen half-written: a local file is written to a temporary name and renamed into place, and an object store
publishes an object only once its upload completes.
"""

from __future__ import annotations

import hashlib
import re
import uuid
from collections.abc import Mapping
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.fs as pafs
import pyarrow.parquet as pq

from solaris.data.hourly import write_table_atomic
from solaris.precompute.pipeline import USER_SHARDS, Staged, Step
from solaris.precompute.spec import shard_of
from solaris.store import FeatureStore

_TABLE_NAME = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,99}$")
_UNSAFE = re.compile(r"[^A-Za-z0-9._-]+")


def run_folder_name(dag_run_key: str) -> str:
    """A filesystem-safe folder name for a run key.

    Airflow run ids hold ``:`` and ``+``; they are replaced for readability, and a short hash of the raw key
    keeps two keys that differ only in those characters apart.
    """
    if not dag_run_key:
        raise ValueError("dag_run_key is empty; pass the DAG run's id (or dag_id/run_id)")
    readable = _UNSAFE.sub("_", dag_run_key).strip("._")[:80]
    digest = hashlib.sha256(dag_run_key.encode()).hexdigest()[:10]
    return f"{readable}-{digest}"


def open_root(root: str | Path) -> tuple[pafs.FileSystem, str]:
    """The filesystem and the path within it of a staging root: a local path (or ``file://``) or a URL."""
    text = str(root)
    if "://" not in text:
        return pafs.LocalFileSystem(), str(Path(text).resolve())
    try:
        return pafs.FileSystem.from_uri(text)
    except (pa.ArrowInvalid, pa.ArrowNotImplementedError) as exc:
        raise ValueError(
            f"staging location {text!r} cannot be opened ({exc}); use a local folder or an object-store URL "
            "such as s3://bucket/prefix"
        ) from None


class Staging:
    """Named Parquet tables under ``root/<run folder>``, removed by :meth:`cleanup` once the run succeeded.

    With more than one host, ``root`` must be storage they all reach (an object-store URL), since the tables
    are read back by whichever worker runs the next task.
    """

    def __init__(self, root: str | Path, dag_run_key: str) -> None:
        self.fs, base = open_root(root)
        self.dag_run_key = dag_run_key
        self.local = isinstance(self.fs, pafs.LocalFileSystem)
        self.path = f"{base.rstrip('/')}/{run_folder_name(dag_run_key)}"

    def table_path(self, name: str) -> str:
        if not _TABLE_NAME.match(name):
            raise ValueError(
                f"staging table name {name!r} is invalid: use letters, digits, '_', '.', '-' (at most 100)"
            )
        return f"{self.path}/{name}.parquet"

    def write(self, name: str, data: pa.Table | pd.DataFrame) -> dict[str, Any]:
        """Write ``data`` as table ``name`` (replacing an earlier one) and return its XCom metadata."""
        table = pa.Table.from_pandas(data, preserve_index=False) if isinstance(data, pd.DataFrame) else data
        path = self.table_path(name)
        if self.local:
            write_table_atomic(table, Path(path))
        else:
            pq.write_table(table, path, filesystem=self.fs, compression="zstd")
        return {"run": self.dag_run_key, "table": name, "path": path, "rows": table.num_rows}

    def read(self, name: str, columns: list[str] | None = None, rows: int | None = None) -> pa.Table:
        """Table ``name``, or its first ``rows`` rows, read no further than they go."""
        path = self.table_path(name)
        if self.fs.get_file_info(path).type != pafs.FileType.File:
            raise FileNotFoundError(
                f"staging table {name!r} of run {self.dag_run_key!r} not found at {path}; "
                "did the task that writes it succeed?"
            )
        if rows is None:
            return pq.read_table(path, columns=columns, filesystem=self.fs)
        with self.fs.open_input_file(path) as source:
            file = pq.ParquetFile(source)
            batches, taken = [], 0
            for batch in file.iter_batches(batch_size=min(max(rows, 1), 65_536), columns=columns):
                if taken >= rows:
                    break
                batches.append(batch.slice(0, rows - taken))
                taken += batches[-1].num_rows
            schema = file.schema_arrow
            return pa.Table.from_batches(batches, schema=pa.schema([schema.field(c) for c in columns or schema.names]))

    def exists(self) -> bool:
        return self.fs.get_file_info(self.path).type != pafs.FileType.NotFound

    def cleanup(self) -> None:
        """Remove the run's folder; a local one is renamed first, so no reader sees a half-deleted run."""
        if not self.exists():
            return
        doomed = self.path
        if self.local:
            doomed = str(Path(self.path).with_name(f".{Path(self.path).name}.{uuid.uuid4().hex}.deleting"))
            self.fs.move(self.path, doomed)
        self.fs.delete_dir(doomed)


class StepStaging:
    """One step's view of the run's staging: it reads and writes only the tables its declaration names
    (:mod:`.pipeline`), so the data flow a reader sees there is the one that runs.

    A sharded table is one part a shard (``parts``: how many each fan-out has this run). A part of a table
    sharded by user holds only its shard's users, checked on every write and read: a user task never takes
    another shard's users (a part without users, a shard's summary, is its shard's by where it is). A step
    that is not mapped reads a sharded table whole, every part in shard order, unless it names one.
    """

    def __init__(self, staging: Staging, step: Step, parts: Mapping[str, int], shadow: bool = False) -> None:
        self.staging = staging
        self.step = step
        self.parts = dict(parts)
        self.shadow = shadow  # a shadow step: the tables its node names are the shadow chain's

    def write(self, table: Staged, data: pa.Table | pd.DataFrame, shard: int | None = None) -> dict[str, Any]:
        table = self._declared(table, self.step.writes, "write")
        data = pa.Table.from_pandas(data, preserve_index=False) if isinstance(data, pd.DataFrame) else data
        name = table.file_name(shard)
        if table.sharded_by == USER_SHARDS and "user_id" in data.column_names:
            self._own_users(table, data, shard)
        return self.staging.write(name, data)

    def read(
        self, table: Staged, shard: int | None = None, columns: list[str] | None = None, rows: int | None = None
    ) -> pa.Table:
        """The table, or part ``shard`` of a sharded one (its first ``rows`` rows, if given)."""
        table = self._declared(table, self.step.reads, "read")
        if table.sharded_by is not None and shard is None:
            return pa.concat_tables([self.read(table, s, columns, rows) for s in range(self._count(table))])
        found = self.staging.read(table.file_name(shard), columns, rows)
        if table.sharded_by == USER_SHARDS and "user_id" in found.column_names:
            self._own_users(table, found, shard)
        return found

    def _count(self, table: Staged) -> int:
        if table.sharded_by not in self.parts:
            raise ValueError(f"staged table {table.name!r} is sharded by {table.sharded_by!r}, whose count is unknown")
        return self.parts[table.sharded_by]

    def _shards_of(self, data: pa.Table) -> np.ndarray:
        return shard_of(data["user_id"].to_numpy(), self.parts[USER_SHARDS])

    def _own_users(self, table: Staged, data: pa.Table, shard: int | None) -> None:
        if shard is None or not 0 <= shard < self._count(table):
            raise ValueError(f"staged table {table.name!r}: shard {shard!r} is outside 0..{self._count(table) - 1}")
        owner = self._shards_of(data)
        if len(outside := np.flatnonzero(owner != shard)):
            first = int(outside[0])
            raise ValueError(
                f"staged table {table.name!r} part {shard} holds {len(outside)} row(s) of other user shards (user "
                f"{data['user_id'][first].as_py()} belongs to shard {int(owner[first])}): a user shard's task takes "
                "only its own users"
            )

    def _declared(self, table: Staged, declared: tuple[Staged, ...], verb: str) -> Staged:
        if self.shadow and table.shadow() in declared:
            return table.shadow()
        if table not in declared:
            names = ", ".join(t.name for t in declared) or "none"
            raise ValueError(f"step {self.step.name!r} does not {verb} staged table {table.name!r} (declared: {names})")
        return table


# Run records looked through for failed runs' staging: at one run an hour, weeks of them.
FAILED_STAGING_SCAN = 1000


def expire_failed_staging(store: FeatureStore, staging_root: str, before: datetime) -> int:
    """Delete the staging of failed runs for hours before ``before``, and count the runs whose staging went.

    A failed run keeps its staged tables for a retry to reuse (:func:`solaris.precompute.nodes.fail`); past the code log's retention a
    retry could no longer rebuild the hour anyway, so they would only fill the disk.
    """
    expired = 0
    for record in store.recent_runs(FAILED_STAGING_SCAN):
        if record.status == "failed" and record.interval_start < before:
            folder = Staging(staging_root, record.run_id)
            if folder.exists():
                folder.cleanup()
                expired += 1
    return expired
