"""What an event log can support, from the log alone, before a week is spent on it (`solaris data profile`).

A log brought from elsewhere often holds only user, item, time and label. Whether SOLARIS pays on it depends
on figures no training run is needed for: how many impressions are of users a run before their hour could
know (every tier but the cohort one is keyed by the user), how much the FM never trained on (the replay's first
span, then each day's refresh), which side features the cohort tier would key on, how often a pair comes back
while its code would still be fresh (what bounds the pair tier's hit rate), and how traffic spreads over the
hours. Each figure is one vectorised pass over the log, read once; only the cohort tier's ceiling replays the
hourly cohort step over the evaluation span (:func:`solaris.eval.ceiling.cohort_reach`).
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import META_FILE, EventLog
from solaris.data.schema import ITEM_FEATURE_PREFIX, USER_FEATURE_PREFIX
from solaris.eval.ceiling import cohort_reach, earliest, known_user_mask
from solaris.eval.spans import ReplaySpans
from solaris.models.features import US_PER_HOUR, ts_micros
from solaris.precompute.params import PrecomputeParams
from solaris.store.codec import to_micros

US_PER_DAY = 24 * US_PER_HOUR
LOG_PARTS = ("users.parquet", "items.parquet")  # the hourly folders are absent where no hour has rows
STATS = {"mean": np.mean, "max": np.max, "p50": lambda v: np.percentile(v, 50), "p90": lambda v: np.percentile(v, 90)}


def check_event_log(log: EventLog) -> None:
    """Refuse a folder that is not a whole event log, naming what is missing or malformed."""
    if not log.root.is_dir():
        raise FileNotFoundError(f"{log.root} is not a folder")
    try:
        _ = log.start, log.end  # parsed here, so that a bad meta.json is named rather than a traceback
    except json.JSONDecodeError as exc:
        raise ValueError(f"{log.root / META_FILE} is not JSON ({exc})") from None
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"{log.root / META_FILE} lacks a valid start and end ({exc!r})") from None
    missing = [part for part in LOG_PARTS if not (log.root / part).exists()]
    if missing:
        raise FileNotFoundError(f"{log.root} is not a whole event log: no {', '.join(missing)}")


def profile_log(log: EventLog, params: PrecomputeParams | None = None) -> dict[str, Any]:
    """Every figure of the profile, JSON-ready; ``params`` gives the TTL and the cohort grid (default: the
    precompute's defaults)."""
    params = params or PrecomputeParams()
    check_event_log(log)
    shown = log.impressions(log.start, log.end, ["ts", "user_id", "item_id"])
    if not shown.num_rows:
        raise ValueError(f"{log.root} has no impressions: nothing to profile")
    requests = log.requests(log.start, log.end, ["ts", "user_id", "candidates"])
    user, item, micros = shown["user_id"].to_numpy(), shown["item_id"].to_numpy(), ts_micros(shown["ts"])
    request_user, request_us = requests["user_id"].to_numpy(), ts_micros(requests["ts"])
    known = known_user_mask(log, shown, log.end)
    met = _candidates(requests["candidates"], request_user, request_us)
    repeat = repeat_mask(user, item, micros, *met, params.ttl_hours)
    spans, spans_problem = _replay_spans(log)
    train_end = None if spans is None else _us(spans.train.end)
    hours = log.hours()
    return {
        "world": log.root.name,
        "root": str(log.root),
        "span": {"start": log.start.isoformat(), "end": log.end.isoformat(), "hours": len(hours)},
        "replay_spans": spans.as_dict() if spans else {"problem": spans_problem},
        "impressions": len(user),
        "users_known": float(known.mean()),
        "by_day": by_day(user, item, micros, known, train_end),
        "side_features": {
            "users": side_features(log.users(), USER_FEATURE_PREFIX),
            "items": side_features(log.items(), ITEM_FEATURE_PREFIX),
        },
        "requests_per_user_day": requests_per_user_day(request_user, request_us),
        "repeat_exposure": {"ttl_hours": params.ttl_hours, "share": float(repeat.mean())},
        "hourly_volume": hourly_volume(request_us, micros, _us(hours[0]), len(hours)),
        "ceilings": None if spans is None else ceilings(log, spans, micros, known, repeat, params),
    }


def by_day(
    user: np.ndarray, item: np.ndarray, micros: np.ndarray, known: np.ndarray, train_end: int | None
) -> list[dict[str, Any]]:
    """Per UTC day with impressions: the share of users known before their hour, and of items and users the FM
    never trained on, both the FM of the first training span (None without one) and the one refreshed daily
    (it has seen every day before)."""
    days, day = np.unique(micros // US_PER_DAY, return_inverse=True)
    counts = np.bincount(day)

    def share(mask: np.ndarray) -> list[float]:
        return (np.bincount(day, weights=mask) / counts).tolist()

    columns = {"users_known": share(known)}
    for what, ids in (("items", item), ("users", user)):
        first = _first_seen(ids, micros)
        columns[f"{what}_not_in_train_span"] = [None] * len(days) if train_end is None else share(first >= train_end)
        columns[f"{what}_not_seen_before_day"] = share(first >= days[day] * US_PER_DAY)
    return [
        {"day": _date(int(d)), "impressions": int(n), **{name: values[k] for name, values in columns.items()}}
        for k, (d, n) in enumerate(zip(days, counts, strict=True))
    ]


def side_features(table: pa.Table, prefix: str) -> dict[str, Any]:
    """The side-feature columns and their distinct values; none is common in a log brought from elsewhere."""
    columns = [c for c in table.column_names if c.startswith(prefix)]
    return {"rows": table.num_rows, "features": {c: int(pc.count_distinct(table[c]).as_py()) for c in columns}}


def requests_per_user_day(user: np.ndarray, micros: np.ndarray) -> dict[str, float]:
    """Over the user-days with a request: what a user's day gives the precompute to speculate on."""
    _, user_code = np.unique(user, return_inverse=True)
    day = micros // US_PER_DAY
    _, counts = np.unique(user_code * (day.max() - day.min() + 1) + (day - day.min()), return_counts=True)
    return {"user_days": len(counts), **_summary(counts, ("mean", "p50", "p90"))}


def repeat_mask(
    user: np.ndarray,
    item: np.ndarray,
    micros: np.ndarray,
    candidate_user: np.ndarray,
    candidate_item: np.ndarray,
    candidate_us: np.ndarray,
    ttl_hours: int,
) -> np.ndarray:
    """Per impression: whether the same user was shown its item, or had it as a candidate, in the ``ttl_hours``
    hours before the impression's hour. A run for an hour knows only what came before the hour, and a pair code
    it writes lives ``ttl_hours``: a pair the user met in no such hour is one the pair tier can feed only by a
    guess beyond the log."""
    n = len(user)
    _, pair = np.unique(
        _pair_keys(np.concatenate([user, candidate_user]), np.concatenate([item, candidate_item])), return_inverse=True
    )
    hour = np.concatenate([micros, candidate_us]) // US_PER_HOUR
    hour = hour - hour.min() + ttl_hours  # every window's start stays inside its pair's block of keys
    stride = int(hour.max()) + 1
    keys = pair.astype(np.int64) * stride + hour
    seen = np.unique(keys)
    shown = keys[:n]
    return np.searchsorted(seen, shown, "left") > np.searchsorted(seen, shown - ttl_hours, "left")


def hourly_volume(request_us: np.ndarray, impression_us: np.ndarray, first_hour_us: int, hours: int) -> dict[str, Any]:
    """Requests and impressions per hour of the log's span, empty hours included: what each hourly run faces."""
    per_hour = {
        name: np.bincount((us - first_hour_us) // US_PER_HOUR, minlength=hours)[:hours]
        for name, us in (("requests", request_us), ("impressions", impression_us))
    }
    return {
        "hours": hours,
        "empty_share": float((per_hour["requests"] == 0).mean()),
        **{name: _summary(counts, ("mean", "p50", "max")) for name, counts in per_hour.items()},
    }


def ceilings(
    log: EventLog,
    spans: ReplaySpans,
    micros: np.ndarray,
    known: np.ndarray,
    repeat: np.ndarray,
    params: PrecomputeParams,
) -> dict[str, Any]:
    """The most each tier could feed over the replay's evaluation span, as the replay reports it: the user-keyed
    tiers the users known, the cohort tier its default grid's reach. The pair tier's is no hard ceiling: the
    repeat exposure bounds what it feeds from pairs the log already showed, and the candidates the hourly run
    guesses (co-visitation, popularity) can add pairs the log never met (MovieLens: no repeats, 2-8% pair
    coverage in its replays)."""
    span = spans.eval
    inside = (micros >= _us(span.start)) & (micros < _us(span.end))
    grid = (params.cohorts, params.cohort_items)
    reach = cohort_reach(log, span, [grid], params)
    return {
        "span": str(span),
        "impressions": int(inside.sum()),
        "users_known": _share(known[inside]),
        "cohort": {
            "grid": f"{grid[0]}x{grid[1]}",
            "share": reach.share(grid),
            "counterless": reach.counterless / reach.impressions if reach.impressions else None,
        },
        "pair_from_repeats": _share(repeat[inside]),
    }


def _candidates(
    candidates: pa.ChunkedArray, request_user: np.ndarray, request_us: np.ndarray
) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """Each (user, item, time) a request listed as a candidate."""
    lengths = pc.list_value_length(candidates).to_numpy()
    items = pc.list_flatten(candidates).to_numpy()
    return np.repeat(request_user, lengths), items, np.repeat(request_us, lengths)


def _replay_spans(log: EventLog) -> tuple[ReplaySpans | None, str | None]:
    """The replay's spans, or why the log has none (too short): the figures that need them are then left out."""
    try:
        return ReplaySpans.of(log), None
    except ValueError as exc:
        return None, str(exc)


def _first_seen(ids: np.ndarray, micros: np.ndarray) -> np.ndarray:
    """Per row: the time its id was first shown."""
    distinct, first = earliest(ids, micros)
    return first[np.searchsorted(distinct, ids)]


def _pair_keys(user: np.ndarray, item: np.ndarray) -> np.ndarray:
    """One int64 per (user, item), from dense codes so that no id's size can overflow it."""
    _, user_code = np.unique(user, return_inverse=True)
    items, item_code = np.unique(item, return_inverse=True)
    return user_code.astype(np.int64) * len(items) + item_code


def _summary(values: np.ndarray, stats: tuple[str, ...]) -> dict[str, float]:
    return {stat: float(STATS[stat](values)) for stat in stats}


def _share(mask: np.ndarray) -> float | None:
    return float(mask.mean()) if len(mask) else None


def _us(t: datetime) -> int:
    return to_micros(t, "time")


def _date(day: int) -> str:
    return datetime.fromtimestamp(day * 86_400, UTC).date().isoformat()
