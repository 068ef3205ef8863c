"""A generated world's traffic as the log a team most often brings first, read back through the CSV importer.

Such a log is user, item, timestamp and label: ids as text (``u-123``, ``ad-45``), no side features, no request
ids, no conversions. Writing a synthetic world that way and importing it with the importer's own code makes a
world with a known ground truth that takes the path real logs take: ids mapped to dense ones, one request per
user-hour, an item shown twice in a user-hour dropped as a duplicate.

Timestamps are written as whole unix seconds: the importer reads an all-number column exactly through Arrow's
integer cast (ISO-8601 text goes through pandas' slower date parser), it is the form most event exports have,
and a second never crosses an hour boundary, so every event keeps its hour.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.csv as pacsv

from solaris.data.eventlog import EventLog
from solaris.data.importer import ColumnMapping, DuplicateRowsWarning, import_source
from solaris.data.sources import read_source

PLAIN_MAPPING = ColumnMapping(user="user", item="item", timestamp="timestamp", label="label")
USER_PREFIX = "u-"
ITEM_PREFIX = "ad-"
CSV_NAME = "plain.csv"
_SCHEMA = pa.schema(
    [
        (PLAIN_MAPPING.user, pa.string()),
        (PLAIN_MAPPING.item, pa.string()),
        (PLAIN_MAPPING.timestamp, pa.int64()),
        (PLAIN_MAPPING.label, pa.int8()),
    ]
)
_US_PER_SECOND = 1_000_000


def plain_rows(impressions: pa.Table) -> pa.Table:
    """Impressions (dense ids, ``ts``, ``click``) as a plain export's rows, in the same order."""
    seconds = pc.divide(impressions["ts"].cast(pa.int64()), _US_PER_SECOND)  # integer division: whole seconds
    columns = [
        _text_ids(USER_PREFIX, impressions["user_id"]),
        _text_ids(ITEM_PREFIX, impressions["item_id"]),
        seconds,
        impressions["click"].cast(pa.int8()),
    ]
    return pa.Table.from_arrays(columns, schema=_SCHEMA)


def _text_ids(prefix: str, ids: pa.ChunkedArray) -> pa.ChunkedArray:
    return pc.binary_join_element_wise(prefix, ids.cast(pa.string()), "")


def write_plain_csv(log: EventLog, path: Path) -> int:
    """Write every impression of ``log`` as a plain CSV, an hour at a time (memory holds one hour); the row
    count. Rows follow the log's time order, a request's impressions by position."""
    rows = 0
    options = pacsv.WriteOptions(quoting_style="none", quoting_header="none")  # no id holds a comma or quote
    with pacsv.CSVWriter(str(path), _SCHEMA, write_options=options) as writer:
        for _, hour in log.iter_impressions(log.start, log.end, ["user_id", "item_id", "ts", "click"]):
            writer.write_table(plain_rows(hour))
            rows += hour.num_rows
    return rows


def import_plain(log: EventLog, target: Path, workdir: Path, *, origin: str, overwrite: bool = False) -> EventLog:
    """``log`` written as a plain CSV in ``workdir`` (the caller removes it) and imported into ``target`` by
    the importer's code, duplicates dropped as it drops them (counted in meta.json ``rows``, not warned of:
    repeats within a user-hour are what this shape of log has). ``origin`` is meta.json's ``source``."""
    path = Path(workdir) / CSV_NAME
    write_plain_csv(log, path)
    source = read_source(path, PLAIN_MAPPING.columns(), "csv")
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", DuplicateRowsWarning)
        target = Path(target)
        return import_source(source, target, PLAIN_MAPPING, origin=origin, name=target.name, overwrite=overwrite)
