"""What the KNN step keeps between runs: each run's neighbour table and the user vectors it was built from.

Every run recomputes every row but writes to the store only the rows that differ from the previous run's
(on the tiny replay about 13% of them change from one hour to the next), so each run needs the previous
rows. One Parquet file per run hour and embedding version, written atomically after the store write; a run
starts from the newest file of an earlier hour, so a retry or rerun of an hour starts from what its first
attempt started from and writes the same rows.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq

from solaris.data.hourly import floor_hour, write_table_atomic
from solaris.enrichment.knn import NeighbourTable

FULL_BUILT_AT = b"solaris.full_built_at"


@dataclass(frozen=True)
class KnnState:
    user_ids: np.ndarray  # [n] sorted
    vectors: np.ndarray  # [n, dim] the user vectors the table was built from
    table: NeighbourTable
    full_built_at: datetime  # the interval start of the last full rebuild


def state_dir(root: Path, version: str) -> Path:
    return Path(root) / version


def _file(folder: Path, hour: datetime) -> Path:
    return folder / f"{floor_hour(hour):%Y-%m-%dT%H}.parquet"


def _hour(path: Path) -> datetime:
    return datetime.strptime(path.stem, "%Y-%m-%dT%H").replace(tzinfo=UTC)


def prune(folder: Path, before: datetime) -> None:
    """Remove the states of hours before ``before`` (a rerun needs only the one before its own hour)."""
    for path in folder.glob("*.parquet"):
        if _hour(path) < before:
            path.unlink(missing_ok=True)


def _matrix(column: pa.ChunkedArray, width: int, dtype: type) -> np.ndarray:
    return pc.list_flatten(column).to_numpy(zero_copy_only=False).astype(dtype).reshape(-1, width)


def save(folder: Path, hour: datetime, state: KnnState) -> None:
    k, dim = state.table.k, state.vectors.shape[1]
    table = pa.table(
        {
            "user_id": pa.array(state.user_ids.astype(np.int64)),
            "vector": pa.FixedSizeListArray.from_arrays(pa.array(state.vectors.astype(np.float32).ravel()), dim),
            "neighbour_ids": pa.FixedSizeListArray.from_arrays(pa.array(state.table.neighbour_ids.ravel()), k),
            "similarities": pa.FixedSizeListArray.from_arrays(pa.array(state.table.similarities.ravel()), k),
        }
    )
    table = table.replace_schema_metadata({FULL_BUILT_AT: state.full_built_at.isoformat().encode()})
    write_table_atomic(table, _file(folder, hour))


def load_before(folder: Path, hour: datetime) -> KnnState | None:
    """The newest state of an hour before ``hour``, or None (first run of this embedding version)."""
    earlier = sorted(p for p in Path(folder).glob("*.parquet") if _hour(p) < floor_hour(hour))
    if not earlier:
        return None
    path = earlier[-1]
    table = pq.read_table(path)
    meta = table.schema.metadata or {}
    if FULL_BUILT_AT not in meta:
        raise ValueError(f"{path}: KNN state without its {FULL_BUILT_AT.decode()} stamp; delete it to rebuild")
    k = table.schema.field("neighbour_ids").type.list_size
    dim = table.schema.field("vector").type.list_size
    ids = table["user_id"].to_numpy().astype(np.int64)
    neighbours = NeighbourTable(
        ids, _matrix(table["neighbour_ids"], k, np.int64), _matrix(table["similarities"], k, np.float32)
    )
    return KnnState(
        ids, _matrix(table["vector"], dim, np.float32), neighbours, datetime.fromisoformat(meta[FULL_BUILT_AT].decode())
    )
