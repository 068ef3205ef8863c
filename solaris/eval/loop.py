"""The replay's hour loop: each hour the precompute runs as of that hour (``run_hour``, the functions the
DAG calls), then the ranker serves that hour's impressions from the store and logs the features as served.

Each replay, and each arm of the top_fraction sweep, keeps its own store and data folder; all of them read
the same event log and the replay's own MLflow registry, never the user's.
"""

from __future__ import annotations

import time
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path
from typing import Any

import numpy as np

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.enrichment.tiers import PAIR, cumulative_coverage, marginal_coverage
from solaris.eval.events import SERVED_COLUMNS
from solaris.eval.figures import HourFigures
from solaris.models.features import pair_key, segment_searchsorted, ts_micros
from solaris.precompute import quality
from solaris.precompute.codelog import CodeLog
from solaris.precompute.run import run_hour
from solaris.precompute.run_files import code_log_of
from solaris.serving import Ranker, Served
from solaris.store.base import FeatureStore
from solaris.store.codec import MICROS_PER_HOUR, from_micros

REPLAY_WORLD = "replay"


def isolated_settings(base: Settings, root: Path, log_root: Path, mlflow_root: Path) -> Settings:
    """Settings whose store, data folder and registry live under ``root`` / ``mlflow_root``; the event log
    is linked in, not copied."""
    data_dir = root / "var"
    worlds = data_dir / "worlds"
    worlds.mkdir(parents=True, exist_ok=True)
    link = worlds / REPLAY_WORLD
    if not link.exists():
        link.symlink_to(Path(log_root).resolve(), target_is_directory=True)
    return base.with_overrides(
        home=root,
        data_dir=data_dir,
        store_url=f"sqlite:///{root / 'store.db'}",
        store_conn_id=None,
        mlflow_tracking_uri=f"sqlite:///{mlflow_root / 'mlflow.db'}",
        mlflow_artifacts_dir=mlflow_root / "artifacts",
        world=REPLAY_WORLD,
    )


@dataclass(frozen=True)
class SpanRun:
    figures: list[HourFigures]
    staleness_hours: np.ndarray  # every pair embedding served, its age in hours


def replay_hours(
    settings: Settings,
    hours: Iterable[datetime],
    serve_from: datetime,
    params: dict[str, Any],
    ranker: Ranker,
    label: str,
    progress: bool = True,
) -> SpanRun:
    """Precompute every hour; serve (and measure) those from ``serve_from`` on."""
    log = EventLog(settings.world_dir())
    hours = list(hours)
    figures, ages = [], []
    for i, hour in enumerate(hours):
        started = time.perf_counter()
        result = run_hour(settings, hour, params, clock=lambda hour=hour: hour)
        if hour < serve_from:
            continue
        served_pairs, served = serve_hour(log, hour, ranker)
        codes = code_log_of(settings, served.embedding_version, ranker.model.code_dim)
        # An hour with nothing to precompute (no requests before it) is skipped: it embedded nothing.
        found = hour_figures(hour, label, served_pairs, served, result["counts"].get("embedded", 0))
        found = found | {"hit_rate": quality.hit_rate(log, codes, hour + HOUR)["hit_rate"]}
        found |= next_run_quality(ranker.store, log, codes, hour + HOUR, int(params["ttl_hours"]))
        ages.append(staleness_hours(codes, hour, served_pairs, served, int(params["ttl_hours"])))
        found["staleness_hours_mean"] = float(ages[-1].mean()) if len(ages[-1]) else None
        figures.append(HourFigures(**found))
        if progress:
            cumulative = " ".join(f"{tier} {share:.2f}" for tier, share in found["coverage"].items())
            print(
                f"[replay] {label} {i + 1}/{len(hours)} {hour:%Y-%m-%d %H}:00  {found['served']} served, coverage "
                f"{cumulative}, {time.perf_counter() - started:.1f} s",
                flush=True,
            )
    if ranker.served_log is not None:
        ranker.served_log.flush()
    return SpanRun(figures, np.concatenate(ages) if ages else np.zeros(0))


ServedPairs = dict[str, np.ndarray]


def serve_hour(log: EventLog, hour: datetime, ranker: Ranker) -> tuple[ServedPairs, Served]:
    """The ranker's answer for every impression of the hour, in one batch read fresh at its last request."""
    shown = log.impressions(hour, hour + HOUR, SERVED_COLUMNS)
    pairs = {
        "user": shown["user_id"].to_numpy().astype(np.int64),
        "item": shown["item_id"].to_numpy().astype(np.int64),
        "ts": ts_micros(shown["ts"]),
        "position": shown["position"].to_numpy().astype(np.int64),
        "request": shown["request_id"].to_numpy().astype(np.int64),
    }
    t = from_micros(int(pairs["ts"].max())) if len(pairs["ts"]) else hour
    served = ranker.serve(pairs["user"], pairs["item"], pairs["ts"], pairs["position"], t, pairs["request"])
    return pairs, served


def hour_figures(hour: datetime, span: str, pairs: ServedPairs, served: Served, fm_calls: int) -> dict[str, object]:
    return {
        "hour": hour.isoformat(),
        "span": span,
        "served": len(served.tiers),
        "coverage": cumulative_coverage(served.tiers),
        "coverage_marginal": marginal_coverage(served.tiers),
        "fm_calls": int(fm_calls),
    }


def next_run_quality(
    store: FeatureStore, log: EventLog, codes: CodeLog, end: datetime, ttl_hours: int
) -> dict[str, Any]:
    """What the precompute's next run records for the hour ending at ``end`` (:mod:`solaris.precompute.quality`):
    its candidate rows and those with a fresh pair code, and hit rate while fresh, its ceiling's count and
    selector AUC of the run whose pairs expire at ``end``."""
    users, items = quality.requested_pairs(log, end - HOUR, end)
    covered = np.zeros(0, bool)
    if len(users):  # the store as the hour saw it: the next run has not written yet
        covered = store.fresh_pairs(codes.version, users, items, end - quality.INSTANT)
    fresh = quality.hit_rate_ttl(log, codes, end, ttl_hours)
    scored = quality.requested_auc(log, codes.score_log, end, ttl_hours)
    return {
        "candidates": len(users),
        "covered_candidates": int(covered.sum()),
        "hit_rate_ttl": fresh.get("hit_rate_ttl"),
        "ttl_pairs": int(fresh["ttl_pairs"]),
        "ttl_hits": int(fresh["ttl_hits"]),
        "ttl_pool_requested": quality.pool_requested(scored, int(fresh["ttl_pairs"])),
        "requested_auc": scored.get("requested_auc"),
    }


def staleness_hours(
    codes_log: CodeLog, hour: datetime, pairs: ServedPairs, served: Served, ttl_hours: int
) -> np.ndarray:
    """Age, at serving time, of each pair embedding served: the latest code written for the pair at or
    before the request (rows are written on hour boundaries, and a pair is re-embedded only once stale)."""
    on_pair = served.tiers == PAIR
    if not on_pair.any():
        return np.zeros(0)
    codes = codes_log.read(hour - ttl_hours * HOUR, hour + HOUR)
    keys = pair_key(codes.user_ids, codes.item_ids)
    created = codes.created_at.astype(np.int64)
    order = np.lexsort((created, keys))
    keys, created = keys[order], created[order]
    query = pair_key(pairs["user"][on_pair], pairs["item"][on_pair])
    ts = pairs["ts"][on_pair]
    lo, hi = np.searchsorted(keys, query, "left"), np.searchsorted(keys, query, "right")
    last = segment_searchsorted(created, lo, hi, ts + 1) - 1
    valid = last >= lo
    return (ts[valid] - created[last[valid]]) / MICROS_PER_HOUR
