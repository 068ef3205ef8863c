"""Speculative candidates: the (user, item) pairs likely to be requested in the coming interval.

The precompute can only pay off on pairs the ranker will actually see, so it guesses them from the recent
request log: users who requested recently and often are likely to come back, and when they do, retrieval
tends to return items they were shown recently, items that retrieval shows together with those, and items
that are popular right now. Only requests strictly before ``interval_start`` are read, so a run for an
interval never sees the traffic it is predicting.

Two passes: what is counted over every user's requests (the likely users, co-visitation, popularity: a
:class:`RequestStats`) is counted an hour of the log at a time, so no task holds the lookback's requests
whole; then the likely users' own requests, read with their ids in the scan filter, give each its pairs. A
user's pairs depend only on its own requests and the stats, so any split of the likely users among tasks
finds the pairs one task finds.

Everything runs on dense integer codes (users and items renumbered 0..n-1) so that a (user, item) pair is
one int64 key and deduplication, grouping and ranking are numpy sorts (:mod:`solaris.precompute.ranking`)
rather than per-row work.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from datetime import UTC, datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import as_utc
from solaris.precompute.params import LIKELY_USERS
from solaris.precompute.ranking import first_per_key, group_rank, order_by

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Priority order: a pair found by several sources keeps the first, and the per-user cap keeps pairs from
# earlier sources first (what a user was shown is better evidence than what is merely popular).
SOURCES = ("recent", "covisit", "popular")
REQUEST_COLUMNS = ["ts", "user_id", "candidates"]
# Co-visits are counted an hour at a time under one int64 key a pair of item ids, so the ids stay below this.
COVISIT_ID_LIMIT = 2**31


@dataclass(frozen=True)
class CandidateConfig:
    lookback: timedelta = timedelta(hours=24)
    # A request's activity weight halves every ``half_life``; it ranks users and item popularity.
    half_life: timedelta = timedelta(hours=6)
    max_users: int = LIKELY_USERS
    # The candidate lists of a user's last ``recent_requests`` requests are their "recent" source.
    recent_requests: int = 3
    # Co-visitation counts items that co-occur in the first ``covisit_head`` candidates of a request.
    covisit_head: int = 10
    # Per user, the first ``covisit_seeds`` recent items seed co-visitation, each adding its top-k partners.
    covisit_seeds: int = 20
    covisit_top_k: int = 10
    popular_items: int = 50
    per_user_cap: int = 200

    def __post_init__(self) -> None:
        for f in fields(self):
            value = getattr(self, f.name)
            if value <= (timedelta(0) if isinstance(value, timedelta) else 0):
                raise ValueError(f"CandidateConfig.{f.name} must be positive, got {value}")


@dataclass(frozen=True)
class RequestStats:
    """What the candidates count over every user's requests of the lookback."""

    likely_users: np.ndarray  # sorted ids of the users likely to come back
    covisit_seed: np.ndarray  # item ids, sorted; each seed's partners best first, ties to the lower id
    covisit_partner: np.ndarray
    covisit_count: np.ndarray
    popular: np.ndarray  # item ids, the most popular first

    @property
    def empty(self) -> bool:
        return not len(self.likely_users)

    def to_table(self) -> pa.Table:
        """One row, each array a list: what the ``count_requests`` step stages for every shard's candidates."""
        return pa.table({f.name: pa.array([getattr(self, f.name)], pa.large_list(pa.int64())) for f in fields(self)})

    @classmethod
    def from_table(cls, table: pa.Table) -> RequestStats:
        return cls(*(table[f.name][0].values.to_numpy().astype(np.int64) for f in fields(cls)))


@dataclass(frozen=True)
class _Shown:
    """The likely users' (request, candidate) rows as parallel arrays; users and items as dense codes."""

    user: np.ndarray  # user code
    request_rank: np.ndarray  # 0 = the user's newest request
    item: np.ndarray  # item code
    recency: np.ndarray  # order within the user: newest request first, then retrieval position


def _weights(ts: np.ndarray, start: datetime, config: CandidateConfig) -> np.ndarray:
    """Each request's recency weight, halving every ``half_life`` before ``start``."""
    age = ((start - EPOCH) // timedelta(microseconds=1) - ts) / (config.half_life / timedelta(microseconds=1))
    return 0.5**age


def _exploded(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(request row, item id, retrieval position) of every candidate of the requests."""
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    request = np.repeat(np.arange(len(lengths)), lengths)
    position = np.arange(len(request)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    return request, pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64), position


def _hour_covisits(
    request: np.ndarray, item: np.ndarray, position: np.ndarray, head: int
) -> tuple[np.ndarray, np.ndarray]:
    """(pair keys, counts) of one hour's co-occurrences in request heads, by :func:`_covisit_key`, sorted."""
    rows = np.flatnonzero(position < head)
    items, item_code = np.unique(item[rows], return_inverse=True)
    request_codes = np.unique(request[rows], return_inverse=True)[1]
    grid = np.full((int(request_codes.max(initial=-1)) + 1, head), -1, np.int64)
    grid[request_codes, position[rows]] = item_code
    a = np.broadcast_to(grid[:, :, None], grid.shape + (head,)).ravel()
    b = np.broadcast_to(grid[:, None, :], grid.shape + (head,)).ravel()
    ok = (a >= 0) & (b >= 0) & (a != b)
    return np.unique(_covisit_key(items[a[ok]], items[b[ok]]), return_counts=True)


def _covisit_key(seed: np.ndarray, partner: np.ndarray) -> np.ndarray:
    """One int64 a (seed, partner) pair of item ids, ordered by seed then partner; ids must be below 2**31."""
    ids = np.r_[seed, partner]
    if len(ids) and not (0 <= ids.min() and ids.max() < COVISIT_ID_LIMIT):
        raise ValueError(
            f"item ids must be in 0..{COVISIT_ID_LIMIT - 1} to count co-visits, got {ids.min()}..{ids.max()}"
        )
    return seed * COVISIT_ID_LIMIT + partner


def _merged_counts(
    keys: np.ndarray, counts: np.ndarray, more_keys: np.ndarray, more_counts: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """Two sets of (key, count) as one, each key once with its counts summed, sorted by key."""
    merged, inverse = np.unique(np.concatenate([keys, more_keys]), return_inverse=True)
    return merged, np.bincount(inverse, weights=np.concatenate([counts, more_counts]), minlength=len(merged)).astype(
        np.int64
    )


def _top_covisits(keys: np.ndarray, counts: np.ndarray, top_k: int) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each seed's ``top_k`` partners by their co-occurrences summed over hours, ties to the lower id."""
    seed, partner = keys // COVISIT_ID_LIMIT, keys % COVISIT_ID_LIMIT
    order = order_by(seed, counts.max(initial=0) - counts)  # stable: equal counts stay in partner order
    keep = order[group_rank(seed[order]) < top_k]
    return seed[keep], partner[keep], counts[keep]


def request_stats(log: EventLog, interval_start: datetime, config: CandidateConfig) -> RequestStats:
    """:class:`RequestStats` of the requests in ``[interval_start - lookback, interval_start)``, an hour at a
    time: what is held is one hour's requests, exploded once, and the co-visit counts so far, each pair once
    (summed at the end, the 24 hours' rows took 6 GiB at a million users)."""
    start = as_utc(interval_start)
    users, weights = [], []
    items, popularity = np.empty(0, np.int64), np.empty(0, np.float64)
    covisit_keys, covisit_counts = np.empty(0, np.int64), np.empty(0, np.int64)
    for _, table in log.iter_requests(start - config.lookback, start, REQUEST_COLUMNS):
        weight = _weights(pc.cast(table["ts"], pa.int64()).to_numpy(), start, config)
        users.append(table["user_id"].to_numpy().astype(np.int64))
        weights.append(weight)
        request, item, position = _exploded(table)
        hour_keys, hour_counts = _hour_covisits(request, item, position, config.covisit_head)
        covisit_keys, covisit_counts = _merged_counts(covisit_keys, covisit_counts, hour_keys, hour_counts)
        hour_items, code = np.unique(item, return_inverse=True)
        merged = np.union1d(items, hour_items)
        total = np.zeros(len(merged))
        total[np.searchsorted(merged, items)] += popularity
        total[np.searchsorted(merged, hour_items)] += np.bincount(code, weights=weight[request])
        items, popularity = merged, total
    if not users:
        empty = np.empty(0, np.int64)
        return RequestStats(empty, empty, empty, empty, empty)
    seed, partner, count = _top_covisits(covisit_keys, covisit_counts, config.covisit_top_k)
    popular = items[np.argsort(-popularity, kind="stable")[: config.popular_items]]
    likely = _likely_users(np.concatenate(users), np.concatenate(weights), config.max_users)
    return RequestStats(likely, seed, partner, count, popular)


def _likely_users(user_ids: np.ndarray, weight: np.ndarray, max_users: int) -> np.ndarray:
    """Sorted ids of the ``max_users`` users with the highest recency-weighted request count."""
    ids, inverse = np.unique(user_ids, return_inverse=True)
    activity = np.bincount(inverse, weights=weight)
    best = np.argsort(-activity, kind="stable")[:max_users]  # ids are sorted, so ties go to the lower id
    return np.sort(ids[best])


def _request_ranks(user_codes: np.ndarray, ts: np.ndarray) -> np.ndarray:
    """0 for each user's newest request, 1 for the one before, ..."""
    order = order_by(user_codes, ts.max(initial=0) - ts)
    ranks = np.empty(len(order), np.int64)
    ranks[order] = group_rank(user_codes[order])
    return ranks


def _shown(table: pa.Table, users: np.ndarray, items: np.ndarray) -> _Shown:
    """The likely users' requests exploded, users and items coded by their place in ``users`` and ``items``."""
    ts = pc.cast(table["ts"], pa.int64()).to_numpy()
    user_code = np.searchsorted(users, table["user_id"].to_numpy().astype(np.int64))
    request, item, position = _exploded(table)
    request_rank = _request_ranks(user_code, ts)[request]
    width = int(position.max(initial=0)) + 1
    return _Shown(
        user=user_code[request],
        request_rank=request_rank,
        item=np.searchsorted(items, item),
        recency=request_rank * width + position,
    )


def _recent(shown: _Shown, recent_requests: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of each user's latest requests, newest request first, then retrieval order."""
    rows = np.flatnonzero(shown.request_rank < recent_requests)
    rows = rows[order_by(shown.user[rows], shown.recency[rows])]
    return shown.user[rows], shown.item[rows]


def _covisited(
    shown: _Shown, covisits: tuple[np.ndarray, ...], n_items: int, seeds_per_user: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Partners of each user's first distinct recent items and their summed co-visit count, best first."""
    rows = order_by(shown.user, shown.recency)
    rows = rows[first_per_key(shown.user[rows] * n_items + shown.item[rows])]
    rows = rows[group_rank(shown.user[rows]) < seeds_per_user]
    seed, partner, count = covisits  # sorted by seed
    lo = np.searchsorted(seed, shown.item[rows], "left")
    width = np.searchsorted(seed, shown.item[rows], "right") - lo
    gather = np.repeat(lo - np.cumsum(width) + width, width) + np.arange(width.sum())
    keys = np.repeat(shown.user[rows], width) * n_items + partner[gather]
    unique_keys, inverse = np.unique(keys, return_inverse=True)
    strength = np.bincount(inverse, weights=count[gather]).astype(np.int64)
    user, partner = unique_keys // n_items, unique_keys % n_items
    order = order_by(user, strength.max(initial=0) - strength)  # stable: ties stay in partner order
    return user[order], partner[order], strength[order]


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "user_id": pd.Series(dtype=np.int64),
            "item_id": pd.Series(dtype=np.int64),
            "source": pd.Categorical([], categories=SOURCES),
            "covisit_strength": pd.Series(dtype=np.int64),
        }
    )


def generate_candidates(
    log: EventLog,
    interval_start: datetime,
    interval_end: datetime,
    config: CandidateConfig = CandidateConfig(),  # noqa: B008 (frozen, so sharing it is safe)
) -> pd.DataFrame:
    """Candidate pairs ``[user_id, item_id, source, covisit_strength]`` for serving
    ``[interval_start, interval_end)``.

    Reads requests in ``[interval_start - lookback, interval_start)`` only; ``interval_end`` just bounds
    the interval named in errors. Each pair appears once, under its highest-priority source; no user has
    more than ``per_user_cap`` pairs. Rows are grouped by user id, each user's best pairs first.
    ``covisit_strength`` is the summed co-visit count the co-visit source ranks a pair by, whichever source
    kept it (0 where co-visitation does not find it): the demand model reads it from here, not by counting
    co-visits again.
    """
    stats = request_stats(log, interval_start, config)
    return candidates_of(log, stats, stats.likely_users, interval_start, interval_end, config)


def candidates_of(
    log: EventLog,
    stats: RequestStats,
    users: np.ndarray,
    interval_start: datetime,
    interval_end: datetime,
    config: CandidateConfig = CandidateConfig(),  # noqa: B008 (frozen, so sharing it is safe)
) -> pd.DataFrame:
    """:func:`generate_candidates` of ``users`` (sorted ids, some of ``stats.likely_users``) from their own
    requests and ``stats``."""
    start, end = as_utc(interval_start), as_utc(interval_end)
    if end <= start:
        raise ValueError(f"interval [{start.isoformat()}, {end.isoformat()}) is empty")
    if not len(users):
        return _empty()
    table = log.requests(start - config.lookback, start, columns=REQUEST_COLUMNS, user_ids=users)
    requested = pc.list_flatten(table["candidates"].combine_chunks()).to_numpy(zero_copy_only=False)
    items = np.unique(
        np.concatenate([requested.astype(np.int64), stats.covisit_seed, stats.covisit_partner, stats.popular])
    )
    shown = _shown(table, users, items)
    n_items = len(items)
    covisits = (
        np.searchsorted(items, stats.covisit_seed),
        np.searchsorted(items, stats.covisit_partner),
        stats.covisit_count,
    )
    covisited = _covisited(shown, covisits, n_items, config.covisit_seeds)
    popular = np.searchsorted(items, stats.popular)
    parts = [
        _recent(shown, config.recent_requests),
        covisited[:2],
        (np.repeat(np.arange(len(users)), len(popular)), np.tile(popular, len(users))),
    ]
    user = np.concatenate([p[0] for p in parts])
    item = np.concatenate([p[1] for p in parts])
    priority = np.repeat(np.arange(len(parts)), [len(p[0]) for p in parts])
    # Each source comes sorted by user and preference, so this stable sort only interleaves them.
    best_first = order_by(user, priority)
    rows = best_first[first_per_key(user[best_first] * n_items + item[best_first])]
    rows = rows[group_rank(user[rows]) < config.per_user_cap]
    return pd.DataFrame(
        {
            "user_id": users[user[rows]],
            "item_id": items[item[rows]],
            "source": pd.Categorical.from_codes(priority[rows], categories=SOURCES),
            "covisit_strength": _strength_of(covisited, user[rows] * n_items + item[rows], n_items),
        }
    )


def _strength_of(covisited: tuple[np.ndarray, ...], keys: np.ndarray, n_items: int) -> np.ndarray:
    """The co-visit strength of each (user code * n_items + item code) key, 0 where co-visitation has none."""
    user, partner, strength = covisited
    found = user * n_items + partner  # distinct: _covisited sums each pair's counts
    out = np.zeros(len(keys), np.int64)
    if len(found):
        order = np.argsort(found)
        at = np.minimum(np.searchsorted(found[order], keys), len(order) - 1)
        hit = found[order][at] == keys
        out[hit] = strength[order][at[hit]]
    return out


def count_by_source(candidates: pd.DataFrame) -> dict[str, int]:
    """Pairs per source, for the run record and XCom."""
    counts = candidates["source"].value_counts()
    return {source: int(counts.get(source, 0)) for source in SOURCES}
