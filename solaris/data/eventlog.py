"""An event log on disk: hourly requests and impressions, side-feature tables and a small metadata file.

Layout under the log's folder::

    meta.json                                   what made it, its span and counts
    users.parquet, items.parquet                side features (user_id/item_id + u_*/i_* int columns)
    requests/dt=YYYY-MM-DD/hour=HH/*.parquet
    impressions/dt=YYYY-MM-DD/hour=HH/*.parquet

Generators and importers build the whole log in a temporary sibling folder and rename it into place, so a
failed or interrupted run leaves either the previous log or nothing, never a partial one.
"""

from __future__ import annotations

import json
import os
import shutil
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from solaris.data import hourly
from solaris.data.schema import IMPRESSIONS, REQUESTS, conform

META_FILE = "meta.json"


@dataclass(frozen=True)
class EventLog:
    root: Path

    @property
    def meta(self) -> dict[str, Any]:
        return json.loads(self._part(META_FILE).read_text())

    def _part(self, name: str) -> Path:
        """A file or dataset of the log. A folder holding no log is an error, not an empty range: a worker
        pointed at the wrong data folder would otherwise compute from no history and succeed."""
        if not (self.root / META_FILE).is_file():
            raise FileNotFoundError(f"{self.root} is not an event log (no {META_FILE}); generate or import one")
        return self.root / name

    @property
    def start(self) -> datetime:
        return datetime.fromisoformat(self.meta["start"])

    @property
    def end(self) -> datetime:
        return datetime.fromisoformat(self.meta["end"])

    def hours(self) -> list[datetime]:
        return hourly.hours_between(self.start, self.end)

    def requests(
        self, start: datetime, end: datetime, columns: list[str] | None = None, user_ids: np.ndarray | None = None
    ) -> pa.Table:
        return hourly.read_range(self._part("requests"), start, end, REQUESTS, columns, user_ids)

    def impressions(
        self, start: datetime, end: datetime, columns: list[str] | None = None, user_ids: np.ndarray | None = None
    ) -> pa.Table:
        return hourly.read_range(self._part("impressions"), start, end, IMPRESSIONS, columns, user_ids)

    def iter_requests(
        self, start: datetime, end: datetime, columns: list[str] | None = None
    ) -> Iterator[tuple[datetime, pa.Table]]:
        return hourly.iter_hours(self._part("requests"), start, end, REQUESTS, columns)

    def iter_impressions(
        self, start: datetime, end: datetime, columns: list[str] | None = None
    ) -> Iterator[tuple[datetime, pa.Table]]:
        return hourly.iter_hours(self._part("impressions"), start, end, IMPRESSIONS, columns)

    def users(self) -> pa.Table:
        return pq.read_table(self._part("users.parquet"))

    def items(self) -> pa.Table:
        return pq.read_table(self._part("items.parquet"))

    def summary(self) -> dict[str, Any]:
        """What a command prints of a log; an import's ``rows`` (read, kept, dropped as duplicates) included."""
        meta = self.meta
        return {k: meta[k] for k in ("name", "source", "start", "end", "hours", "counts", "rows") if k in meta}


def refuse_existing(target: Path, overwrite: bool) -> None:
    """Checked before any work too, by a writer whose log takes minutes to make (:mod:`solaris.data.plain`)."""
    if target.exists() and not overwrite:
        raise FileExistsError(f"{target} already exists; pass overwrite (--overwrite) to replace it")


@contextmanager
def building(target: Path, overwrite: bool = False) -> Iterator[Path]:
    """Yield a temporary folder to build a log in; on success it replaces ``target`` atomically."""
    target = Path(target)
    refuse_existing(target, overwrite)
    target.parent.mkdir(parents=True, exist_ok=True)
    tmp = target.with_name(f".{target.name}.{uuid.uuid4().hex}.building")
    tmp.mkdir()
    try:
        yield tmp
        old = None
        if target.exists():
            old = target.with_name(f".{target.name}.{uuid.uuid4().hex}.old")
            os.replace(target, old)
        os.replace(tmp, target)
        if old is not None:
            shutil.rmtree(old, ignore_errors=True)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def write_event_log(
    folder: Path,
    requests: pa.Table,
    impressions: pa.Table,
    users: pa.Table,
    items: pa.Table,
    meta: dict[str, Any],
    part: str = "part-0",
) -> None:
    """Write a complete log into ``folder`` (normally the one :func:`building` yields)."""
    requests = conform(requests, REQUESTS, "requests")
    impressions = conform(impressions, IMPRESSIONS, "impressions")
    hourly.write_hourly(requests, folder / "requests", part)
    hourly.write_hourly(impressions, folder / "impressions", part)
    counts = {
        "requests": requests.num_rows,
        "impressions": impressions.num_rows,
        "clicks": int(pc.sum(impressions["click"]).as_py() or 0),
        "conversions": int(pc.sum(impressions["conversion"]).as_py() or 0),
    }
    finish_event_log(folder, users, items, meta, counts)


def finish_event_log(
    folder: Path, users: pa.Table, items: pa.Table, meta: dict[str, Any], counts: dict[str, int]
) -> None:
    """Write the side tables and meta.json; shared by one-shot writers and ones that stream hour by hour.

    ``counts`` holds the hourly tables' totals (requests, impressions, clicks, conversions); the user and item
    counts are added here.
    """
    pq.write_table(users, folder / "users.parquet", compression="zstd")
    pq.write_table(items, folder / "items.parquet", compression="zstd")
    write_meta(folder, {**meta, "counts": {**counts, "users": users.num_rows, "items": items.num_rows}})


def write_meta(folder: Path, meta: dict[str, Any]) -> None:
    """meta.json replaced whole: a log that grows (live traffic) is read while it is rewritten."""
    tmp = folder / f".{META_FILE}.{uuid.uuid4().hex}.tmp"
    try:
        tmp.write_text(json.dumps(meta, indent=2, sort_keys=True, default=str))
        os.replace(tmp, folder / META_FILE)
    finally:
        tmp.unlink(missing_ok=True)
