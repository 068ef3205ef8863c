"""An imported log's tables with their dense ids turned back into the source's integer ids, so tests can
compare them with the rows they wrote."""

from __future__ import annotations

import pandas as pd
import pyarrow as pa

from solaris.data.eventlog import EventLog
from solaris.data.idmap import IdMap, IdMaps


def as_source_ids(ids: IdMaps, frame: pd.DataFrame) -> pd.DataFrame:
    """``frame`` with its dense user and item ids (and candidates) as the source's integer ids."""

    def source(id_map: IdMap, dense: object) -> list[int]:
        return [int(raw) for raw in id_map.raw_ids(dense)]

    frame = frame.copy()
    for column, id_map in (("user_id", ids.user), ("item_id", ids.item)):
        if column in frame:
            frame[column] = source(id_map, frame[column])
    if "candidates" in frame:
        frame["candidates"] = [source(ids.item, c) for c in frame["candidates"]]
    return frame


def source_frame(log: EventLog, table: pa.Table) -> pd.DataFrame:
    maps = IdMaps.read(log.root)
    assert maps is not None, f"{log.root} has no id map"
    return as_source_ids(maps, table.to_pandas())
