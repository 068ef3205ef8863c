"""What predicts that a (user, item) pair will be requested soon, as of ``t``, from the request log alone.

The demand model reads these. Three kinds of evidence, all from requests strictly before ``t``:
- the user's return propensity: how recently and how often they requested, and how much at this time of
  day yesterday (traffic follows the clock);
- the pair's own history: how often and how recently retrieval put the item in the user's candidate lists,
  and at which position (retrieval tends to return what it returned before);
- co-visitation: how strongly the item co-occurs, in the heads of the day's requests, with the items the
  user was recently listed (half the pool comes from co-visitation and has no history of its own);
- the item's popularity now and its trend.
Every count is ``log1p``-scaled. Computed on dense integer keys with numpy, like the candidate generator:
a pool of a few hundred thousand pairs takes well under a second.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR, as_utc
from solaris.models.features import check_ids, pair_key
from solaris.precompute.candidates import EPOCH

LOOKBACK = timedelta(hours=24)
NAMES = (
    "user_hours_since_last",
    "user_requests_1h",
    "user_requests_6h",
    "user_requests_24h",
    "user_requests_same_time_yesterday",
    "pair_times_listed",
    "pair_hours_since_listed",
    "pair_never_listed",
    "pair_best_position",
    "pair_last_position",
    "pair_share_of_user_requests",
    "pair_covisit_strength",
    "item_listed_1h",
    "item_listed_6h",
    "item_listed_24h",
    "hour_sin",
    "hour_cos",
)


ITEM_WINDOWS = {"item_listed_1h": 1, "item_listed_6h": 6, "item_listed_24h": int(LOOKBACK / HOUR)}
LIST_WIDTH = "list_width"


@dataclass(frozen=True)
class ItemListings:
    """What the features read of every user's requests: each item's listings in the last 1, 6 and 24 hours, and
    the longest candidate list (positions are read as shares of it). A user shard's features read their own
    users' requests and these, computed once an hour over all users, and come out as one task's would."""

    item_ids: np.ndarray  # [n] int64, sorted
    counts: np.ndarray  # [n, 3] int64: listings in the last 1, 6, 24 hours
    list_width: int

    def to_table(self) -> pa.Table:
        table = pa.table({"item_id": self.item_ids, **{h: self.counts[:, i] for i, h in enumerate(ITEM_WINDOWS)}})
        return table.replace_schema_metadata({LIST_WIDTH: str(self.list_width)})

    @classmethod
    def merged(cls, parts: list[ItemListings]) -> ItemListings:
        """The listings of requests split among ``parts`` (by hour), counted as one."""
        items = np.unique(np.concatenate([p.item_ids for p in parts])) if parts else np.empty(0, np.int64)
        counts = np.zeros((len(items), len(ITEM_WINDOWS)), np.int64)
        for part in parts:
            counts[np.searchsorted(items, part.item_ids)] += part.counts
        return cls(items, counts, max((p.list_width for p in parts), default=1))

    @classmethod
    def from_table(cls, table: pa.Table) -> ItemListings:
        width = (table.schema.metadata or {}).get(LIST_WIDTH.encode())
        if width is None:
            raise ValueError(f"item listings table has no {LIST_WIDTH!r} in its schema metadata")
        counts = np.stack([table[h].to_numpy().astype(np.int64) for h in ITEM_WINDOWS], axis=1).reshape(-1, 3)
        return cls(table["item_id"].to_numpy().astype(np.int64), counts, int(width))


def item_listings_of(log: EventLog, at: datetime) -> ItemListings:
    """:class:`ItemListings` of every user's requests of the day before ``at``, read an hour at a time."""
    hours = log.iter_requests(at - LOOKBACK, at, ["ts", "candidates"])
    return ItemListings.merged([item_listings(table, at) for _, table in hours])


def item_listings(requests: pa.Table, at: datetime) -> ItemListings:
    """:class:`ItemListings` of the requests of ``[at - 24 h, at)``, all users' (``ts``, ``candidates``; any
    older request is left out, so a caller may pass a longer window it read anyway)."""
    lists = requests["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    listed_item = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    request_age = _ages_hours(requests["ts"], as_utc(at))
    listed_age = np.repeat(request_age, lengths)
    items = np.unique(listed_item)
    counts = np.zeros((len(items), len(ITEM_WINDOWS)), np.int64)
    for i, hours in enumerate(ITEM_WINDOWS.values()):
        counts[:, i] = np.bincount(np.searchsorted(items, listed_item[listed_age < hours]), minlength=len(items))
    width = int(lengths[request_age <= LOOKBACK / HOUR].max(initial=1))
    return ItemListings(items, counts, max(width, 1))


def demand_features(
    log: EventLog, pool: pd.DataFrame, at: datetime, ttl_hours: int, listings: ItemListings | None = None
) -> np.ndarray:
    """``[n, len(NAMES)]`` float32 features of each pair of the pool as of ``at`` (requests in ``[at - 24 h,
    at)``): a pool as the candidate generator makes it, whose ``covisit_strength`` is its own co-visit count.

    ``ttl_hours`` is the window the pair would be fresh for: "same time yesterday" counts the user's
    requests in ``[at - 24 h, at - 24 h + ttl)``. Given the hour's ``listings``, only the pool's users'
    requests are read.
    """
    at = as_utc(at)
    users = pool["user_id"].to_numpy(np.int64)
    items = pool["item_id"].to_numpy(np.int64)
    of_users = None if listings is None else np.unique(users)
    table = log.requests(at - LOOKBACK, at, columns=["ts", "user_id", "candidates"], user_ids=of_users)
    listings = item_listings(table, at) if listings is None else listings
    return _features(table, users, items, pool["covisit_strength"].to_numpy(np.float64), at, ttl_hours, listings)


def columns(features: np.ndarray, names: tuple[str, ...]) -> np.ndarray:
    """The columns a model was trained on, by name, so a model from before a feature was added still reads
    its own; a name this code does not compute is an error naming it."""
    unknown = [name for name in names if name not in NAMES]
    if unknown:
        raise ValueError(f"demand features {unknown} are not computed here; known: {', '.join(NAMES)}")
    return features[:, [NAMES.index(name) for name in names]]


def _ages_hours(ts: pa.ChunkedArray, at: datetime) -> np.ndarray:
    micros = pc.cast(ts, pa.int64()).to_numpy()
    return ((at - EPOCH) // timedelta(microseconds=1) - micros) / (HOUR / timedelta(microseconds=1))


def _features(
    table: pa.Table,
    users: np.ndarray,
    items: np.ndarray,
    covisit_strength: np.ndarray,
    at: datetime,
    ttl_hours: int,
    listings: ItemListings,
) -> np.ndarray:
    n, horizon = len(users), LOOKBACK / HOUR
    out = np.zeros((n, len(NAMES)), np.float32)
    column = {name: i for i, name in enumerate(NAMES)}
    hour = at.hour + at.minute / 60
    out[:, column["hour_sin"]] = math.sin(2 * math.pi * hour / 24)
    out[:, column["hour_cos"]] = math.cos(2 * math.pi * hour / 24)
    request_age = _ages_hours(table["ts"], at)
    request_user = table["user_id"].to_numpy().astype(np.int64)

    # the user's requests: recency, counts by window, and yesterday's traffic at this time
    user_pos, found = _lookup(request_user, users)
    windows = {
        "user_requests_1h": request_age < 1,
        "user_requests_6h": request_age < 6,
        "user_requests_24h": np.ones(len(request_age), bool),
        "user_requests_same_time_yesterday": request_age >= horizon - ttl_hours,
    }
    codes = np.searchsorted(np.unique(request_user), request_user)
    n_users = int(codes.max(initial=-1)) + 1
    for name, mask in windows.items():
        counts = np.bincount(codes[mask], minlength=n_users)
        out[:, column[name]] = np.log1p(_gather(counts, user_pos, found, 0))
    last_age = np.full(n_users, horizon)
    np.minimum.at(last_age, codes, request_age)
    out[:, column["user_hours_since_last"]] = np.log1p(_gather(last_age, user_pos, found, horizon))

    # the pair's appearances in the user's candidate lists
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    listed_item = pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    listed_user = np.repeat(request_user, lengths)
    listed_age = np.repeat(request_age, lengths)
    width = listings.list_width
    listed_pos = (np.arange(len(listed_item)) - np.repeat(np.cumsum(lengths) - lengths, lengths)) / width
    keys = _pair_key(listed_user, listed_item)
    order = np.lexsort((listed_age, keys))  # each pair's newest appearance first
    keys, listed_age, listed_pos = keys[order], listed_age[order], listed_pos[order]
    unique, first, times = np.unique(keys, return_index=True, return_counts=True)
    best_pos = np.minimum.reduceat(listed_pos, first) if len(first) else np.zeros(0)
    at_pair, listed = _lookup(unique, _pair_key(users, items))
    times_listed = _gather(times, at_pair, listed, 0)
    out[:, column["pair_never_listed"]] = ~listed
    out[:, column["pair_times_listed"]] = np.log1p(times_listed)
    out[:, column["pair_hours_since_listed"]] = np.log1p(_gather(listed_age[first], at_pair, listed, horizon))
    out[:, column["pair_best_position"]] = _gather(best_pos, at_pair, listed, 1.0)
    out[:, column["pair_last_position"]] = _gather(listed_pos[first], at_pair, listed, 1.0)
    user_24h = np.expm1(out[:, column["user_requests_24h"]])
    out[:, column["pair_share_of_user_requests"]] = times_listed / np.maximum(user_24h, 1)

    # co-visitation: the candidate generator's own score for the pair (0 where it does not find it)
    out[:, column["pair_covisit_strength"]] = np.log1p(covisit_strength)

    # the item's popularity in retrieval, now and over the day, over every user's requests
    pos, hit = _lookup(listings.item_ids, items)
    for i, name in enumerate(ITEM_WINDOWS):
        out[:, column[name]] = np.log1p(_gather(listings.counts[:, i], pos, hit, 0))
    return out


def _pair_key(users: np.ndarray, items: np.ndarray) -> np.ndarray:
    """One int64 per pair, stable across calls, so two key arrays can be compared (ids are model inputs)."""
    return pair_key(check_ids(users, "user_id"), check_ids(items, "item_id"))


def _lookup(sorted_or_not: np.ndarray, queries: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """Position of each query among the unique values of ``sorted_or_not`` (sorted), and whether found."""
    values = np.unique(sorted_or_not)
    pos = np.searchsorted(values, queries)
    found = np.zeros(len(queries), bool)
    inside = pos < len(values)
    found[inside] = values[pos[inside]] == queries[inside]
    return pos, found


def _gather(values: np.ndarray, pos: np.ndarray, found: np.ndarray, default: float) -> np.ndarray:
    """``values[pos]`` where found, ``default`` elsewhere (``pos`` may point one past the end there)."""
    out = np.full(len(pos), default, np.float64)
    out[found] = values[pos[found]]
    return out
