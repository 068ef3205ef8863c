"""Speculative candidates: the (user, item) pairs likely to be requested in the coming interval.

The precompute can only pay off on pairs the ranker will actually see, so it guesses them from the recent
request log: users who requested recently and often are likely to come back, and when they do, retrieval
tends to return items they were shown recently, items that retrieval shows together with those, and items
that are popular right now. Only requests strictly before ``interval_start`` are read, so a run for an
interval never sees the traffic it is predicting.

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
from solaris.precompute.ranking import first_per_key, group_rank, order_by

EPOCH = datetime(1970, 1, 1, tzinfo=UTC)
# Priority order: a pair found by several sources keeps the first, and the per-user cap keeps pairs from
# earlier sources first (what a user was shown is better evidence than what is merely popular).
SOURCES = ("recent", "covisit", "popular")
REQUEST_COLUMNS = ["ts", "user_id", "candidates"]


@dataclass(frozen=True)
class CandidateConfig:
    lookback: timedelta = timedelta(hours=24)
    # A request's activity weight halves every ``half_life``; it ranks users and item popularity.
    half_life: timedelta = timedelta(hours=6)
    max_users: int = 20_000
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
class _Shown:
    """The lookback's (request, candidate) rows as parallel arrays; items and users as dense codes."""

    request: np.ndarray
    user: np.ndarray  # user code, -1 for users not selected as likely to come back
    weight: np.ndarray  # the request's recency weight
    request_rank: np.ndarray  # 0 = the user's newest request
    item: np.ndarray  # item code
    position: np.ndarray  # retrieval position within the request
    recency: np.ndarray  # order within the user: newest request first, then retrieval position


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


def _recent(shown: _Shown, recent_requests: int) -> tuple[np.ndarray, np.ndarray]:
    """Candidates of each user's latest requests, newest request first, then retrieval order."""
    rows = np.flatnonzero((shown.user >= 0) & (shown.request_rank < recent_requests))
    rows = rows[order_by(shown.user[rows], shown.recency[rows])]
    return shown.user[rows], shown.item[rows]


def _covisitation(shown: _Shown, n_items: int, head: int, top_k: int) -> tuple[np.ndarray, ...]:
    """(seed, partner, count) for each item's ``top_k`` partners by co-occurrence in request heads."""
    rows = np.flatnonzero(shown.position < head)
    request_codes = np.unique(shown.request[rows], return_inverse=True)[1]
    grid = np.full((int(request_codes.max(initial=-1)) + 1, head), -1, np.int64)
    grid[request_codes, shown.position[rows]] = shown.item[rows]
    a = np.broadcast_to(grid[:, :, None], grid.shape + (head,)).ravel()
    b = np.broadcast_to(grid[:, None, :], grid.shape + (head,)).ravel()
    ok = (a >= 0) & (b >= 0) & (a != b)
    keys, counts = np.unique(a[ok] * n_items + b[ok], return_counts=True)
    seed, partner = keys // n_items, keys % n_items
    order = order_by(seed, counts.max(initial=0) - counts)  # stable: equal counts stay in partner order
    keep = order[group_rank(seed[order]) < top_k]
    return seed[keep], partner[keep], counts[keep]


def _covisited(
    shown: _Shown, covisits: tuple[np.ndarray, ...], n_items: int, seeds_per_user: int
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Partners of each user's first distinct recent items and their summed co-visit count, best first."""
    rows = np.flatnonzero(shown.user >= 0)
    rows = rows[order_by(shown.user[rows], shown.recency[rows])]
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


def _popular(shown: _Shown, n_users: int, n_items: int, top: int) -> tuple[np.ndarray, np.ndarray]:
    """The recency-weighted most frequent candidates overall, offered to every likely user."""
    popularity = np.bincount(shown.item, weights=shown.weight, minlength=n_items)
    best = np.argsort(-popularity, kind="stable")[:top]
    return np.repeat(np.arange(n_users), len(best)), np.tile(best, n_users)


def _empty() -> pd.DataFrame:
    return pd.DataFrame(
        {
            "user_id": pd.Series(dtype=np.int64),
            "item_id": pd.Series(dtype=np.int64),
            "source": pd.Categorical([], categories=SOURCES),
            "covisit_strength": pd.Series(dtype=np.int64),
        }
    )


def _shown(table: pa.Table, start: datetime, config: CandidateConfig) -> tuple[_Shown, np.ndarray, np.ndarray]:
    """Explode the requests' candidate lists; returns the rows, the likely users and the item ids."""
    ts = pc.cast(table["ts"], pa.int64()).to_numpy()
    user_ids = table["user_id"].to_numpy()
    age = ((start - EPOCH) // timedelta(microseconds=1) - ts) / (config.half_life / timedelta(microseconds=1))
    weight = 0.5**age
    users = _likely_users(user_ids, weight, config.max_users)
    user_pos = np.searchsorted(users, user_ids).clip(max=len(users) - 1)
    user_code = np.where(users[user_pos] == user_ids, user_pos, -1)
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False).astype(np.int64)
    request = np.repeat(np.arange(len(lengths)), lengths)
    items, item_code = np.unique(pc.list_flatten(lists).to_numpy(zero_copy_only=False), return_inverse=True)
    request_rank = _request_ranks(np.unique(user_ids, return_inverse=True)[1], ts)[request]
    position = np.arange(len(request)) - np.repeat(np.cumsum(lengths) - lengths, lengths)
    shown = _Shown(
        request=request,
        user=user_code[request],
        weight=weight[request],
        request_rank=request_rank,
        item=item_code,
        position=position,
        recency=request_rank * (int(lengths.max(initial=0)) + 1) + position,
    )
    return shown, users, items.astype(np.int64)


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
    start = as_utc(interval_start)
    requests = log.requests(start - config.lookback, start, columns=REQUEST_COLUMNS)
    return candidates_from(requests, interval_start, interval_end, config)


def candidates_from(
    requests: pa.Table,
    interval_start: datetime,
    interval_end: datetime,
    config: CandidateConfig = CandidateConfig(),  # noqa: B008 (frozen, so sharing it is safe)
) -> pd.DataFrame:
    """:func:`generate_candidates` from the requests it reads (:data:`REQUEST_COLUMNS` of ``[interval_start -
    lookback, interval_start)``), for a caller that reads them for something else too."""
    start, end = as_utc(interval_start), as_utc(interval_end)
    if end <= start:
        raise ValueError(f"interval [{start.isoformat()}, {end.isoformat()}) is empty")
    shown, users, items = _shown(requests, start, config)
    if not len(shown.item):
        return _empty()
    n_items = len(items)
    covisits = _covisitation(shown, n_items, config.covisit_head, config.covisit_top_k)
    covisited = _covisited(shown, covisits, n_items, config.covisit_seeds)
    parts = [
        _recent(shown, config.recent_requests),
        covisited[:2],
        _popular(shown, len(users), n_items, config.popular_items),
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
