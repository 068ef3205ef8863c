"""How well the precompute served the hour just past: hit rates of its pairs, the selector's ranking, coverage
by serving tier and what the FM calls bought.

A pair is a *hit* when it is requested as a candidate (a request's candidate list holds it) while it is fresh.

- hit rate while fresh (``hit_rate_ttl``): of the pairs the run ``ttl_hours`` ago wrote, whose TTLs have all
  ended (each pair's own, :mod:`.expiry`), the share requested at any time while they were fresh; the honest figure, measured once it is final;
- same-hour hit rate (``hit_rate``): of the pairs the previous run wrote, the share requested during the hour
  they were made for (a lower bound that undercounts every later hit; the health page and the replay plot it);
- selector AUC (``requested_auc``): how well the verifier's score ranked that same run's scored pool by
  "requested while it would have been fresh", selected or not (:mod:`.scorelog`);
- coverage: of the (request, candidate) pairs served in the last hour, the share for which each tier
  (pair, similar items, user aggregate, neighbours) held a fresh value, the share with any tier, and the
  share each tier fed first in the feeding order (``coverage_first_<tier>``: its marginal coverage);
- calls_per_covered_candidate: the candidate rows the pair tier covered per FM call made for the hour, and its inverse.

Coverage must be measured before this run writes: the run replaces user aggregates and neighbour rows, and
once they are gone the store no longer knows what was served. Runs write on hour boundaries, so the store
was constant over the last hour and one read at its last instant gives what every request saw.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.enrichment.cohorts import log_cohorts
from solaris.enrichment.tiers import FED_BY, feeding_tier, marginal_coverage, presence
from solaris.models.metrics import auc
from solaris.precompute.codelog import CodeLog
from solaris.precompute.expiry import expires_of
from solaris.precompute.ranking import pair_keys
from solaris.precompute.scorelog import ScoreLog
from solaris.store.base import FeatureStore
from solaris.store.codec import to_micros

INSTANT = timedelta(microseconds=1)


def requested_pairs(log: EventLog, start: datetime, end: datetime) -> tuple[np.ndarray, np.ndarray]:
    """(user_ids, item_ids) of every (request, candidate) in ``[start, end)``, one row per occurrence."""
    table = log.requests(start, end, columns=["user_id", "candidates"])
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    users = np.repeat(table["user_id"].to_numpy().astype(np.int64), lengths)
    return users, pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def requested_mask(
    user_ids: np.ndarray, item_ids: np.ndarray, requested_users: np.ndarray, requested_items: np.ndarray
) -> np.ndarray:
    """Bool per pair: is it among the requested (user, item) pairs."""
    n = len(user_ids)
    keys, _ = pair_keys(np.r_[user_ids, requested_users], np.r_[item_ids, requested_items])
    return np.isin(keys[:n], keys[n:])


def hit_rate(log: EventLog, codes: CodeLog, interval_start: datetime) -> dict[str, float]:
    """Share of the pairs written for the previous hour that were requested during it (``previous_pairs``:
    how many the previous run wrote, i.e. the FM calls made for that hour)."""
    previous = interval_start - HOUR
    written = codes.read(previous, interval_start)
    n_written = len(written.user_ids)
    if not n_written:
        return {"hit_rate": 0.0, "previous_pairs": 0, "previous_hits": 0}
    requested = requested_pairs(log, previous, interval_start)
    hits = int(requested_mask(written.user_ids, written.item_ids, *requested).sum())
    return {"hit_rate": hits / n_written, "previous_pairs": n_written, "previous_hits": hits}


def hit_rate_ttl(log: EventLog, codes: CodeLog, interval_start: datetime, ttl_hours: int) -> dict[str, float]:
    """Of the pairs the run at ``w = interval_start - ttl_hours`` wrote, each fresh over ``[w, its expiry)``
    (:mod:`.expiry`: at the latest ``interval_start``, so every window has ended), the share requested as a
    candidate at any time in its window.

    ``ttl_pairs``/``ttl_hits`` are the counts (to pool over hours); no ``hit_rate_ttl`` when that run wrote
    nothing. ``ttl_hours`` is this run's TTL, assumed to be the earlier run's.
    """
    written_at = interval_start - ttl_hours * HOUR
    written = codes.read(written_at, written_at + HOUR)
    expires = expires_of(written, ttl_hours)
    hits = np.zeros(len(expires), bool)
    for hour in (written_at + k * HOUR for k in range(ttl_hours)):  # each hour of the log read once
        fresh = expires > to_micros(hour, "hour")
        requested = requested_pairs(log, hour, hour + HOUR)
        hits |= fresh & requested_mask(written.user_ids, written.item_ids, *requested)
    found: dict[str, float] = {"ttl_pairs": len(hits), "ttl_hits": int(hits.sum())}
    return found | ({"hit_rate_ttl": float(hits.mean())} if len(hits) else {})


def requested_auc(log: EventLog, scores: ScoreLog, interval_start: datetime, ttl_hours: int) -> dict[str, float]:
    """AUC of the verifier's score for "requested as a candidate in ``[w, w + ttl)``" over every pair the run
    at ``w = interval_start - ttl_hours`` scored (``scored_pairs``; ``scored_requested`` of them positive).

    Selected or not, each pair is labelled over the window it would have been (or was) fresh in, so the AUC
    judges the ranking, not what the run chose. No ``requested_auc`` when either label is missing: an AUC
    there is undefined, and a stand-in 0.5 would read as a useless selector.
    """
    scored_at = interval_start - ttl_hours * HOUR
    pool = scores.read(scored_at, scored_at + HOUR)
    label = requested_mask(pool.user_ids, pool.item_ids, *requested_pairs(log, scored_at, interval_start))
    found: dict[str, float] = {"scored_pairs": len(label), "scored_requested": int(label.sum())}
    if 0 < label.sum() < len(label):
        found["requested_auc"] = rank_auc(label, pool.scores)
    return found


def pool_requested(scored: dict[str, float], ttl_pairs: int) -> int | None:
    """The ``scored_requested`` of :func:`requested_auc`, or None where the run wrote pairs but left no scored
    pool: a shadow run writes the challenger's codes for the champion's selection and scores nothing, so
    after a promotion the first ``ttl_hours`` judge pairs whose pool is not the new version's to read."""
    return None if ttl_pairs and not scored["scored_pairs"] else int(scored["scored_requested"])


def hit_ceiling(pool_requested: int | None, pairs: int) -> float | None:
    """The most a run's hit rate while fresh could be: its scored pool's pairs requested while fresh over the
    pairs it wrote (capped at 1). Whatever the selector, a run that writes ``pairs`` of this pool hits no more;
    a low ceiling says the budget outgrows what the pool can be asked for, not that the selector ranks badly.
    None when the run wrote nothing or its pool is unknown."""
    return min(1.0, pool_requested / pairs) if pairs and pool_requested is not None else None


def rank_auc(labels: np.ndarray, scores: np.ndarray) -> float:
    """:func:`solaris.models.metrics.auc` of any real scores: it wants probabilities, and an AUC depends only
    on the scores' order, so each score is replaced by its dense rank scaled into [0, 1] (ties stay tied)."""
    _, dense = np.unique(np.asarray(scores, np.float64), return_inverse=True)
    return auc(labels, dense / max(int(dense.max(initial=0)), 1))


def figures(
    store: FeatureStore,
    version: str,
    log: EventLog,
    codes: CodeLog,
    interval_start: datetime,
    ttl_hours: int,
) -> dict[str, float]:
    """Every figure of this module for the run at ``interval_start``, as its ``coverage`` step records them."""
    previous = hit_rate(log, codes, interval_start)
    found = coverage(store, version, log, interval_start, fm_calls=int(previous["previous_pairs"]))
    found |= previous | hit_rate_ttl(log, codes, interval_start, ttl_hours)
    found |= requested_auc(log, codes.score_log, interval_start, ttl_hours)
    ceiling = hit_ceiling(pool_requested(found, int(found["ttl_pairs"])), int(found["ttl_pairs"]))
    return found | ({"hit_ceiling_ttl": ceiling} if ceiling is not None else {})


def coverage(
    store: FeatureStore, version: str, log: EventLog, interval_start: datetime, fm_calls: int | None = None
) -> dict[str, float]:
    """Per tier, the share of the last hour's served pairs it covered (``coverage_<tier>``), ``_any``, and
    ``coverage_first_<tier>``: the share it fed first, in :data:`~solaris.enrichment.tiers.FED_BY`.

    ``covered_pair_candidates``: the hour's (request, candidate) rows with a fresh pair code. Given
    ``fm_calls``, the FM calls made for that hour (the pairs the previous run wrote, ``previous_pairs`` of
    :func:`hit_rate`: in a steady state what one hour of the precompute costs), also
    ``fm_calls_per_covered_candidate`` and ``covered_candidates_per_fm_call``; each left out where its divisor
    is 0.
    """
    users, items = requested_pairs(log, interval_start - HOUR, interval_start)
    found: dict[str, float] = {"served_pairs": len(users)}
    if not len(users):
        found |= {f"coverage_{tier}": 0.0 for tier in (*FED_BY, "any")}
        found |= {f"coverage_first_{tier}": 0.0 for tier in FED_BY}
        return found | calls_per_covered_candidate(0, fm_calls)
    read = store.read_tiers_batch(version, users, items, interval_start - INSTANT, cohorts=log_cohorts(log, users))
    masks = presence(read)
    found |= {f"coverage_{tier}": float(mask.mean()) for tier, mask in masks.items()}
    found["coverage_any"] = float(np.logical_or.reduce(list(masks.values())).mean())
    found |= {f"coverage_first_{tier}": share for tier, share in marginal_coverage(feeding_tier(read)).items()}
    return found | calls_per_covered_candidate(int(read.pair_mask.sum()), fm_calls)


def calls_per_covered_candidate(covered: int, fm_calls: int | None) -> dict[str, float]:
    """``covered_pair_candidates`` and, with ``fm_calls``, both ratios where their divisor is not 0."""
    found: dict[str, float] = {"covered_pair_candidates": covered}
    if fm_calls is not None and covered:
        found["fm_calls_per_covered_candidate"] = fm_calls / covered
    if fm_calls:
        found["covered_candidates_per_fm_call"] = covered / fm_calls
    return found
