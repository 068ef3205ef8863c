"""Import a real interaction log (CSV or Parquet) into the event-log layout of :mod:`solaris.data.eventlog`.

Reading the file and parsing its columns (and the errors naming the row and column of a bad cell) live in
:mod:`solaris.data.sources`; this module turns the parsed rows into events, requests and side tables. Every row
is validated before anything is written, and the log is built in a temporary folder and renamed into place,
so bad input leaves no output at all. User and item ids become dense ids, their map written with the log
(:mod:`solaris.data.idmap`).
"""

from __future__ import annotations

import warnings
from dataclasses import asdict, dataclass, replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import pyarrow as pa

from solaris.data.eventlog import EventLog, building, write_event_log
from solaris.data.idmap import IdMap, IdMaps
from solaris.data.schema import ITEM_FEATURE_PREFIX, TS, USER_FEATURE_PREFIX
from solaris.data.side_tables import build_side_table
from solaris.data.sources import (
    LogImportError,
    Source,
    parse_binary,
    parse_ratings,
    parse_raw_ids,
    parse_request_ids,
    parse_timestamps,
    read_source,
)

FORMATS = ("csv", "parquet")
ON_DUPLICATE = ("drop", "error")
HOUR_US = 3_600_000_000
MINUTE_US = 60_000_000
MAX_POSITION = np.iinfo(np.int16).max
_SHOWN_DUPLICATES = 3


class DuplicateRowsWarning(UserWarning):
    """Rows showing an item again in the same request were dropped."""


@dataclass(frozen=True)
class Kept:
    """What became of the source's rows: ``read`` = ``kept`` + ``dropped`` (duplicates in one request)."""

    read: int
    kept: int
    dropped: int
    dropped_clicks: int

    def as_dict(self) -> dict[str, int]:
        return asdict(self)


@dataclass(frozen=True)
class ColumnMapping:
    """Which source column plays which role; the click comes from ``label`` or from ``rating``."""

    user: str
    item: str
    timestamp: str
    label: str | None = None
    rating: str | None = None
    rating_threshold: float | None = None
    request_id: str | None = None
    conversion: str | None = None
    user_features: tuple[str, ...] = ()
    item_features: tuple[str, ...] = ()

    def __post_init__(self) -> None:
        if (self.label is None) == (self.rating is None):
            raise LogImportError("map exactly one of label (--label) or rating (--rating)")
        if (self.rating is None) != (self.rating_threshold is None):
            raise LogImportError("a rating column (--rating) needs a threshold (--rating-threshold), and only it")
        named = self.columns()
        repeated = sorted({c for c in named if named.count(c) > 1})
        if repeated:
            raise LogImportError(f"column(s) {', '.join(repeated)} mapped to more than one role")

    def columns(self) -> list[str]:
        roles = [self.user, self.item, self.timestamp, self.label, self.rating, self.request_id, self.conversion]
        return [c for c in roles if c is not None] + list(self.user_features) + list(self.item_features)

    def as_dict(self) -> dict[str, Any]:
        return asdict(self)


@dataclass(frozen=True)
class Events:
    """Validated events, one entry per kept source row (``position`` = its place in the source frame).

    ``user`` and ``item`` are dense ids; ``ids`` maps them back to the source's (every id of a kept row)."""

    position: np.ndarray
    user: np.ndarray
    item: np.ndarray
    ts: np.ndarray
    click: np.ndarray
    conversion: np.ndarray
    request: np.ndarray | None
    ids: IdMaps
    session: np.ndarray | None = None  # without request ids: the user's session (see :func:`sessions`)

    def take(self, keep: np.ndarray) -> Events:
        request = None if self.request is None else self.request[keep]
        session = None if self.session is None else self.session[keep]
        return replace(
            self,
            position=self.position[keep],
            user=self.user[keep],
            item=self.item[keep],
            ts=self.ts[keep],
            click=self.click[keep],
            conversion=self.conversion[keep],
            request=request,
            session=session,
        )


def parse_events(source: Source, mapping: ColumnMapping) -> Events:
    if source.frame.empty:
        raise LogImportError(f"{source.name}: no data rows")
    n = len(source.frame)
    if mapping.label is not None:
        click = parse_binary(source, mapping.label)
    else:
        click = (parse_ratings(source, mapping.rating) >= mapping.rating_threshold).astype("int8")
    conversion = np.zeros(n, "int8") if mapping.conversion is None else parse_binary(source, mapping.conversion)
    request = None if mapping.request_id is None else parse_request_ids(source, mapping.request_id)
    ts = parse_timestamps(source, mapping.timestamp)
    users, user = IdMap.assign(parse_raw_ids(source, mapping.user), ts)
    items, item = IdMap.assign(parse_raw_ids(source, mapping.item), ts)
    return Events(np.arange(n), user, item, ts, click, conversion, request, IdMaps(users, items))


def compress_time(events: Events, time_scale: float) -> Events:
    """Divide the time since the first event by ``time_scale``, keeping every event's order.

    A slow log (MovieLens-100K spans 7 months, 5,157 hours, most of them empty) then replays hour by hour
    in a few hundred hours, each holding ``time_scale`` source hours; TTLs and spans are read in these hours.
    """
    if not (np.isfinite(time_scale) and time_scale >= 1):
        raise LogImportError(f"time_scale={time_scale!r}: must be a number >= 1 (1 keeps the source's time)")
    if time_scale == 1:
        return events
    first = int(events.ts.min())
    return replace(events, ts=first + np.floor((events.ts - first) / time_scale).astype("int64"))


def sessions(events: Events, gap_minutes: float) -> Events:
    """Number each user's sessions: a gap of more than ``gap_minutes`` between two consecutive events of a
    user (in time order, file order breaking ties) starts the next one.

    Only for logs without request ids, where a request is otherwise a whole user-hour: with sessions, an item
    shown again after a pause is a new request's impression rather than a duplicate. Call it on the source's
    times, before :func:`compress_time`, so the gap is measured in the source's minutes.
    """
    if events.request is not None:
        raise LogImportError("a session gap (--session-gap-minutes) applies only to logs without --request-id")
    if isinstance(gap_minutes, bool) or not (isinstance(gap_minutes, int | float) and np.isfinite(gap_minutes)):
        raise LogImportError(f"session_gap_minutes={gap_minutes!r}: must be a number of minutes > 0")
    if gap_minutes <= 0:
        raise LogImportError(f"session_gap_minutes={gap_minutes!r}: must be a number of minutes > 0")
    order = np.lexsort((events.position, events.ts, events.user))
    user, ts = events.user[order], events.ts[order]
    starts = np.ones(len(order), bool)
    starts[1:] = (user[1:] != user[:-1]) | (np.diff(ts) > gap_minutes * MINUTE_US)
    session = np.empty(len(order), "int64")
    session[order] = np.cumsum(starts) - 1
    return replace(events, session=session)


def request_groups(events: Events) -> tuple[np.ndarray, ...]:
    """What makes a request: the source's request ids, else one request per user per hour, split further at
    the user's session breaks when there are sessions (so a request never leaves its hour partition)."""
    if events.request is not None:
        return (events.request,)
    hour = events.ts // HOUR_US
    return (hour, events.user) if events.session is None else (hour, events.user, events.session)


def handle_duplicates(source: Source, events: Events, on_duplicate: str) -> tuple[Events, int]:
    """Keep the first of rows showing one item twice in one request; report them, then drop or refuse.

    Downstream an impression is known by (request, item), so a repeat would be ambiguous: without request ids
    that is the same user and item within one hour (of the compressed time, when time is compressed), and
    within one session too when there are sessions (:func:`sessions`).
    """
    if on_duplicate not in ON_DUPLICATE:
        raise LogImportError(f"on_duplicate={on_duplicate!r}: choose one of {', '.join(ON_DUPLICATE)}")
    keys = pd.DataFrame({f"k{i}": k for i, k in enumerate((*request_groups(events), events.user, events.item))})
    repeated = keys.duplicated(keep="first").to_numpy()
    count = int(repeated.sum())
    if count == 0:
        return events, 0
    shown = []
    for p in np.flatnonzero(repeated)[:_SHOWN_DUPLICATES]:
        same = (keys == keys.iloc[p]).all(axis=1).to_numpy()
        earlier = int(events.position[np.argmax(same)])
        shown.append(f"{source.where(int(events.position[p]))} repeats {source.where(earlier)}")
    message = f"{source.name}: {count} duplicate row(s) (the same item twice in one request): {'; '.join(shown)}"
    if events.request is None and events.session is None:
        message += (
            " (without --request-id a request is a whole user-hour; --session-gap-minutes N makes a repeat after "
            "a pause of more than N minutes a new request)"
        )
    if on_duplicate == "error":
        raise LogImportError(message + "; pass --on-duplicate drop to keep the first of each")
    warnings.warn(message + "; dropped, keeping the first of each", DuplicateRowsWarning, stacklevel=2)
    return events.take(~repeated), count


def _ts_array(micros: np.ndarray) -> pa.Array:
    return pa.array(micros, pa.int64()).cast(TS)


def build_requests(source: Source, events: Events, column: str) -> tuple[pa.Table, pa.Table]:
    """Group events into requests: the source's request ids, else one request per user per hour.

    A request's candidates are its impressed items in time order (source order breaks ties) and a position is
    the index in that list. The whole request is stamped with its first event's time, as if the ranker had
    served it then (as the synthetic world does), so a request and its impressions share one hour partition
    and no impression's features can see another's outcome. Errors cite ``column``.
    """
    group_keys = request_groups(events)
    order = np.lexsort((events.position, events.ts) + tuple(reversed(group_keys)))
    ev = events.take(order)
    keys = [k[order] for k in group_keys]
    starts_mask = np.ones(len(order), bool)
    starts_mask[1:] = np.any([k[1:] != k[:-1] for k in keys], axis=0)
    starts = np.flatnonzero(starts_mask)
    group = np.cumsum(starts_mask) - 1
    position = np.arange(len(order)) - starts[group]
    _check_requests(source, ev, group, starts, position, column)
    request_ids = np.arange(len(starts), dtype="int64") if ev.request is None else ev.request[starts]
    impressions = pa.table(
        {
            "request_id": request_ids[group],
            "ts": _ts_array(ev.ts[starts][group]),
            "user_id": ev.user,
            "item_id": ev.item,
            "position": position.astype("int16"),
            "click": ev.click,
            "conversion": ev.conversion,
        }
    )
    offsets = pa.array(np.append(starts, len(order)).astype("int32"))
    requests = pa.table(
        {
            "request_id": request_ids,
            "ts": _ts_array(ev.ts[starts]),
            "user_id": ev.user[starts],
            "candidates": pa.ListArray.from_arrays(offsets, pa.array(ev.item, pa.int64())),
        }
    )
    return requests, impressions


def _check_requests(
    source: Source, ev: Events, group: np.ndarray, starts: np.ndarray, position: np.ndarray, column: str
) -> None:
    if ev.request is not None:
        owner = ev.user[starts][group]
        other_user = ev.user != owner
        if other_user.any():
            p = int(np.argmax(other_user))
            first = source.where(int(ev.position[starts[group[p]]]))
            owner_raw, row_raw = ev.ids.user.raw_ids([owner[p], ev.user[p]])
            raise source.fail(
                int(ev.position[p]),
                column,
                f"request {int(ev.request[p])} belongs to user {owner_raw} ({first}) but this row's user is {row_raw}",
            )
    if position.max() > MAX_POSITION:
        p = int(np.argmax(position > MAX_POSITION))
        raise source.fail(int(ev.position[p]), column, f"a request has more than {MAX_POSITION + 1} impressions")


def event_span(ts: np.ndarray) -> tuple[datetime, datetime]:
    """From the first event's hour to one hour past the last event's hour."""
    first, last = int(ts.min()) // HOUR_US, int(ts.max()) // HOUR_US
    start = datetime.fromtimestamp(first * 3600, tz=UTC)
    return start, start + timedelta(hours=last - first + 1)


def import_source(
    source: Source,
    target: Path,
    mapping: ColumnMapping,
    *,
    origin: str,
    name: str | None = None,
    on_duplicate: str = "drop",
    time_scale: float = 1.0,
    session_gap_minutes: float | None = None,
    overwrite: bool = False,
) -> EventLog:
    """Validate ``source`` completely, then write the log to ``target`` in one atomic step.

    ``session_gap_minutes`` (logs without request ids only): see :func:`sessions`; None keeps one request per
    user-hour.
    """
    parsed = parse_events(source, mapping)
    if session_gap_minutes is not None:
        parsed = sessions(parsed, session_gap_minutes)
    events, dropped = handle_duplicates(source, compress_time(parsed, time_scale), on_duplicate)
    clicks = int(parsed.click.sum(dtype="int64"))
    rows = Kept(len(parsed.position), len(events.position), dropped, clicks - int(events.click.sum(dtype="int64")))
    users, user_vocab = build_side_table(
        source, events.position, events.user, events.ids.user, "user_id", mapping.user_features, USER_FEATURE_PREFIX
    )
    items, item_vocab = build_side_table(
        source, events.position, events.item, events.ids.item, "item_id", mapping.item_features, ITEM_FEATURE_PREFIX
    )
    requests, impressions = build_requests(source, events, mapping.request_id or mapping.user)
    start, end = event_span(events.ts)
    meta = {
        "name": name or Path(target).name,
        "source": origin,
        "start": start.isoformat(),
        "end": end.isoformat(),
        "hours": int((end - start) / timedelta(hours=1)),
        "mapping": mapping.as_dict(),
        "on_duplicate": on_duplicate,
        "session_gap_minutes": session_gap_minutes,
        "dropped_duplicates": dropped,
        "rows": rows.as_dict(),
        "time_scale": time_scale,
        "vocabularies": {**user_vocab, **item_vocab},
    }
    with building(Path(target), overwrite=overwrite) as folder:
        write_event_log(folder, requests, impressions, users, items, meta)
        events.ids.write(folder)
    return EventLog(Path(target))


def import_file(
    path: Path, target: Path, mapping: ColumnMapping, *, fmt: str | None = None, **options: Any
) -> EventLog:
    """Import a CSV or Parquet log (format from ``fmt``, else from the file's suffix); ``options`` are
    :func:`import_source`'s keywords (name, on_duplicate, time_scale, session_gap_minutes, overwrite)."""
    if fmt is not None and fmt not in FORMATS:
        raise LogImportError(f"format {fmt!r}: choose one of {', '.join(FORMATS)}")
    source = read_source(Path(path), mapping.columns(), fmt)
    return import_source(source, target, mapping, origin=str(Path(path).resolve()), **options)
