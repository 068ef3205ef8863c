"""The hourly log of the pair codes each run wrote: ``<root>/<embedding version>/dt=…/hour=…/codes.parquet``.

The store keeps a pair only for its TTL (a few hours), but the user aggregate averages a user's pair codes
over 24 hours, and the hit rate asks which pairs an earlier run wrote; this log (the offline side of the
feature store) answers both. One file per hour, written atomically and replaced by a rerun of that hour.
The hourly run's ``expire`` step removes the hours older than the ``code_log_retention_hours`` parameter
(:meth:`CodeLog.prune`), so the log holds a bounded number of hours.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.hourly import floor_hour, partition_dir, prune_hours, read_range, scan_range, write_table_atomic
from solaris.data.schema import TS
from solaris.precompute.scorelog import ScoreLog
from solaris.precompute.spec import EVERY_USER, UserShard

FILE_NAME = "codes.parquet"


def schema(code_dim: int) -> pa.Schema:
    return pa.schema(
        [
            pa.field("ts", TS, nullable=False),  # the writing run's created_at
            pa.field("user_id", pa.int64(), nullable=False),
            pa.field("item_id", pa.int64(), nullable=False),
            pa.field("score", pa.float32(), nullable=False),
            pa.field("code", pa.list_(pa.float32(), code_dim), nullable=False),
            # When the code expires (solaris.precompute.expiry); null in hours logged before expiries were.
            pa.field("expires", TS, nullable=True),
        ]
    )


@dataclass(frozen=True)
class Codes:
    user_ids: np.ndarray  # [n] int64
    item_ids: np.ndarray  # [n] int64
    scores: np.ndarray  # [n] float32
    codes: np.ndarray  # [n, dim] float32
    created_at: np.ndarray  # [n] datetime64[us], UTC
    expires_at: np.ndarray  # [n] datetime64[us], UTC; NaT where the hour was logged before expiries were

    def subset(self, keep: np.ndarray) -> Codes:
        """The rows ``keep`` (a bool mask or indices) selects."""
        return Codes(**{f.name: getattr(self, f.name)[keep] for f in fields(self)})


@dataclass(frozen=True)
class CodeLog:
    root: Path
    version: str
    code_dim: int

    @property
    def path(self) -> Path:
        return Path(self.root) / self.version

    @property
    def score_log(self) -> ScoreLog:
        """The same runs' scored pools (:mod:`.scorelog`), beside this log: ``<root>/../scores/<version>``."""
        return ScoreLog(Path(self.root).parent / "scores", self.version)

    def write_hour(
        self,
        hour: datetime,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        scores: np.ndarray,
        codes: np.ndarray,
        expires_at: np.ndarray,
    ) -> Path:
        """Replace ``hour``'s file with these rows (an empty hour still gets a file, so a rerun that now
        writes nothing cannot leave an earlier attempt's rows behind); ``expires_at``: datetime64, each code's."""
        hour = floor_hour(hour)
        codes = np.asarray(codes, dtype=np.float32)
        if codes.ndim != 2 or codes.shape[1] != self.code_dim or len(codes) != len(user_ids):
            raise ValueError(f"codes must be [{len(user_ids)}, {self.code_dim}], got shape {codes.shape}")
        table = pa.table(
            {
                "ts": pa.array(np.full(len(codes), np.datetime64(hour.replace(tzinfo=None), "us"))),
                "user_id": pa.array(np.asarray(user_ids, np.int64)),
                "item_id": pa.array(np.asarray(item_ids, np.int64)),
                "score": pa.array(np.asarray(scores, np.float32)),
                "code": pa.FixedSizeListArray.from_arrays(pa.array(codes.ravel()), self.code_dim),
                "expires": pa.array(np.asarray(expires_at, "datetime64[us]")),
            }
        ).cast(schema(self.code_dim))
        path = partition_dir(self.path, hour) / FILE_NAME
        write_table_atomic(table, path)
        return path

    def read(self, start: datetime, end: datetime, with_codes: bool = True, users: UserShard = EVERY_USER) -> Codes:
        """Every row written for an hour in ``[start, end)``, of ``users`` only (scanned a batch at a time: a
        shard's task never holds the other shards' codes); without the codes (``[n, 0]``) for a reader that
        only counts pairs."""
        layout = schema(self.code_dim)
        columns = None if with_codes else [n for n in layout.names if n != "code"]
        if users.every_user:
            table = read_range(self.path, start, end, layout, columns)
        else:
            batches = scan_range(self.path, start, end, columns)
            kept = [b.filter(pa.array(users.holds(b["user_id"].to_numpy()))) for b in batches]
            table = pa.Table.from_batches(kept, layout.empty_table().select(columns or layout.names).schema)
        flat = pc.list_flatten(table["code"]).to_numpy(zero_copy_only=False) if with_codes else np.empty(0)
        return Codes(
            user_ids=table["user_id"].to_numpy().astype(np.int64),
            item_ids=table["item_id"].to_numpy().astype(np.int64),
            scores=table["score"].to_numpy().astype(np.float32),
            codes=flat.astype(np.float32).reshape(table.num_rows, self.code_dim if with_codes else 0),
            created_at=pc.cast(table["ts"], pa.int64()).to_numpy().astype("datetime64[us]"),
            expires_at=table["expires"].to_numpy(zero_copy_only=False).astype("datetime64[us]"),
        )

    def prune(self, before: datetime) -> int:
        """Delete the file of every hour that ends by ``before`` (see :func:`~solaris.data.hourly.prune_hours`);
        returns how many hour files were removed. Readers ask only for hours within the retention, so none of
        them wants a removed hour."""
        return prune_hours(self.path, before, FILE_NAME)
