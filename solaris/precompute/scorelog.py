"""The hourly log of each run's scored pool: ``<data_dir>/precompute/scores/<embedding version>/dt=…/hour=…``,
beside the code log of the same runs (:attr:`.codelog.CodeLog.score_log`).

The code log keeps only the pairs a run chose; judging the selector needs the ones it passed over too. So
every run logs each pair the selector scored, its score (the ``score`` column the selector ranked by) and
whether it was selected; :func:`~.quality.requested_auc` asks, once the pairs' TTL has run out, how
well that score ranked the pairs that were then requested. One file per hour and user shard (``scores-<shard>``),
each written atomically and replaced by a rerun of its shard; a rerun of the whole hour clears the hour first
(:meth:`ScoreLog.clear_hour`), so that no part of a run with more shards outlives it. The ``expire`` step prunes
the hours with the code log's retention.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import datetime
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.hourly import floor_hour, partition_dir, prune_hours, read_range, write_table_atomic
from solaris.data.schema import TS
from solaris.precompute.ranking import pair_keys

FILES = "scores*.parquet"  # one a user shard; ``scores.parquet``, one an hour, before user shards

SCHEMA = pa.schema(
    [
        pa.field("ts", TS, nullable=False),  # the scoring run's hour
        pa.field("user_id", pa.int64(), nullable=False),
        pa.field("item_id", pa.int64(), nullable=False),
        pa.field("score", pa.float32(), nullable=False),
        pa.field("selected", pa.bool_(), nullable=False),
    ]
)


@dataclass(frozen=True)
class Scores:
    user_ids: np.ndarray  # [n] int64
    item_ids: np.ndarray  # [n] int64
    scores: np.ndarray  # [n] float32
    selected: np.ndarray  # [n] bool
    created_at: np.ndarray  # [n] datetime64[us], UTC

    def subset(self, keep: np.ndarray) -> Scores:
        """The rows ``keep`` (a bool mask or indices) selects."""
        return Scores(**{f.name: getattr(self, f.name)[keep] for f in fields(self)})


@dataclass(frozen=True)
class ScoreLog:
    root: Path
    version: str

    @property
    def path(self) -> Path:
        return Path(self.root) / self.version

    def write_hour(
        self,
        hour: datetime,
        user_ids: np.ndarray,
        item_ids: np.ndarray,
        scores: np.ndarray,
        selected: np.ndarray,
        shard: int = 0,
    ) -> Path:
        """Replace ``hour``'s file of user shard ``shard`` with these rows (an empty pool still gets a file, as
        in the code log)."""
        n = len(user_ids)
        if not len(item_ids) == len(scores) == len(selected) == n:
            raise ValueError(f"score log rows differ in length: {n}, {len(item_ids)}, {len(scores)}, {len(selected)}")
        hour = floor_hour(hour)
        table = pa.table(
            {
                "ts": pa.array(np.full(n, np.datetime64(hour.replace(tzinfo=None), "us"))),
                "user_id": pa.array(np.asarray(user_ids, np.int64)),
                "item_id": pa.array(np.asarray(item_ids, np.int64)),
                "score": pa.array(np.asarray(scores, np.float32)),
                "selected": pa.array(np.asarray(selected, bool)),
            }
        ).cast(SCHEMA)
        path = partition_dir(self.path, hour) / f"scores-{shard}.parquet"
        write_table_atomic(table, path, no_dictionary=("score",))
        return path

    def clear_hour(self, hour: datetime) -> int:
        """Delete ``hour``'s files, before a run of the hour writes them again; returns how many went."""
        files = sorted(partition_dir(self.path, floor_hour(hour)).glob(FILES))
        for file in files:
            file.unlink(missing_ok=True)
        return len(files)

    def write_pool(self, hour: datetime, scored: pd.DataFrame, chosen: pd.DataFrame, shard: int = 0) -> Path:
        """The selector's input (``user_id``, ``item_id``, ``score``), each row flagged if ``chosen`` holds its pair."""
        users, items = scored["user_id"].to_numpy(np.int64), scored["item_id"].to_numpy(np.int64)
        in_users, in_items = chosen["user_id"].to_numpy(np.int64), chosen["item_id"].to_numpy(np.int64)
        keys, _ = pair_keys(np.r_[users, in_users], np.r_[items, in_items])
        selected = np.isin(keys[: len(users)], keys[len(users) :])
        return self.write_hour(hour, users, items, scored["score"].to_numpy(np.float32), selected, shard)

    def read(self, start: datetime, end: datetime) -> Scores:
        """Every row scored by a run of an hour in ``[start, end)``."""
        table = read_range(self.path, start, end, SCHEMA)
        return Scores(
            user_ids=table["user_id"].to_numpy().astype(np.int64),
            item_ids=table["item_id"].to_numpy().astype(np.int64),
            scores=table["score"].to_numpy().astype(np.float32),
            selected=table["selected"].to_numpy(zero_copy_only=False).astype(bool),
            created_at=pc.cast(table["ts"], pa.int64()).to_numpy().astype("datetime64[us]"),
        )

    def prune(self, before: datetime) -> int:
        """Delete every hour that ends by ``before``; returns how many hour files went (as the code log's)."""
        return prune_hours(self.path, before, FILES)
