"""What the KNN step keeps between runs: each run's neighbour table, a user shard at a time.

Every run recomputes every row but writes to the store only the rows that differ from the previous run's
(on the tiny replay about 13% of them change from one hour to the next), so each run needs the previous
rows. One folder per run hour and embedding version, one Parquet file in it per user shard, each written
atomically after that shard's store write. A shard starts from its file in the newest earlier hour's folder,
so a retry or rerun of an hour starts from what its first attempt started from and writes the same rows; a
shard without one there (the first run, a run that failed part way, a changed ``user_shards``) rewrites all
its rows.
"""

from __future__ import annotations

import shutil
from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from solaris.data.hourly import floor_hour, write_table_atomic
from solaris.enrichment.knn import NeighbourTable
from solaris.precompute.spec import UserShard

FULL_BUILT_AT = b"solaris.full_built_at"


@dataclass(frozen=True)
class KnnState:
    table: NeighbourTable  # a shard's rows, by user id
    full_built_at: datetime  # the interval start of the last full rebuild


def state_dir(root: Path, version: str) -> Path:
    return Path(root) / version


def _hour_dir(folder: Path, hour: datetime) -> Path:
    return folder / f"{floor_hour(hour):%Y-%m-%dT%H}"


def _file(folder: Path, hour: datetime, users: UserShard) -> Path:
    return _hour_dir(folder, hour) / f"shard-{users.shard}-of-{users.count}.parquet"


def _hour(path: Path) -> datetime:
    return datetime.strptime(path.name.removesuffix(".parquet"), "%Y-%m-%dT%H").replace(tzinfo=UTC)


def prune(folder: Path, before: datetime) -> None:
    """Remove the states of hours before ``before`` (a rerun needs only the one before its own hour)."""
    for path in Path(folder).glob("*T*"):
        if _hour(path) >= before:
            continue
        if path.is_dir():
            shutil.rmtree(path, ignore_errors=True)
        else:  # a state from before states were kept by shard
            path.unlink(missing_ok=True)


def _matrix(column: pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    return pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype).reshape(-1, width)


def save(folder: Path, hour: datetime, users: UserShard, state: KnnState) -> None:
    k = state.table.k
    table = pa.table(
        {
            "user_id": pa.array(state.table.user_ids.astype(np.int64)),
            "neighbour_ids": pa.FixedSizeListArray.from_arrays(pa.array(state.table.neighbour_ids.ravel()), k),
            "similarities": pa.FixedSizeListArray.from_arrays(pa.array(state.table.similarities.ravel()), k),
        }
    )
    table = table.replace_schema_metadata({FULL_BUILT_AT: state.full_built_at.isoformat().encode()})
    write_table_atomic(table, _file(folder, hour, users))


def load_before(folder: Path, hour: datetime, users: UserShard) -> KnnState | None:
    """The shard's state in the newest hour before ``hour`` that left one, or None: the first run of this
    embedding version, or that hour's run did not get to this shard or had other shards."""
    earlier = sorted(p for p in Path(folder).glob("*T*") if p.is_dir() and _hour(p) < floor_hour(hour))
    if not earlier:
        return None
    path = _file(folder, _hour(earlier[-1]), users)
    if not path.exists():
        return None
    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    if FULL_BUILT_AT not in meta:
        raise ValueError(f"{path}: KNN state without its {FULL_BUILT_AT.decode()} stamp; delete it to rebuild")
    k = table.schema.field("neighbour_ids").type.list_size
    neighbours = NeighbourTable(
        table["user_id"].to_numpy().astype(np.int64),
        _matrix(table["neighbour_ids"], k, np.int64),
        _matrix(table["similarities"], k, np.float32),
    )
    return KnnState(neighbours, datetime.fromisoformat(meta[FULL_BUILT_AT].decode()))
