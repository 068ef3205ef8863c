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

Each figure is a ratio of counts that add up over users, so a user shard's task counts its own users
(:class:`~.spec.UserShard`: its requests, and the pairs written and scored for them) and one task adds the
shards' counts up into the figures (:func:`figures_of`), the same figures one task over every user gets.

Coverage must be measured before this run writes: the run replaces user aggregates and neighbour rows, and
once they are gone the store no longer knows what was served. Runs write on hour boundaries, so the store
was constant over the last hour and one read at its last instant gives what every request saw.
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.enrichment.cohorts import log_cohorts
from solaris.enrichment.tiers import FED_BY, TIER_NAMES, feeding_tier, presence
from solaris.models.metrics import auc
from solaris.precompute.codelog import CodeLog
from solaris.precompute.expiry import expires_of
from solaris.precompute.ranking import pair_keys
from solaris.precompute.scorelog import ScoreLog
from solaris.precompute.spec import EVERY_USER, UserShard
from solaris.store.base import FeatureStore
from solaris.store.codec import to_micros

INSTANT = timedelta(microseconds=1)

# The counts hour_counts adds up over users, by the function that makes them.
COVERAGE_COUNTS = (
    "served_pairs",
    *(f"covered_{tier}" for tier in (*FED_BY, "any")),
    *(f"fed_first_{tier}" for tier in FED_BY),
)
HOUR_COUNTS = (*COVERAGE_COUNTS, "previous_pairs", "previous_hits", "ttl_pairs", "ttl_hits")


def requested_pairs(
    log: EventLog, start: datetime, end: datetime, users: UserShard = EVERY_USER
) -> tuple[np.ndarray, np.ndarray]:
    """(user_ids, item_ids) of every (request, candidate) in ``[start, end)``, one row per occurrence, of
    ``users`` only (their ids filter the scan: another shard's requests are never held)."""
    user_ids = None if users.every_user else requesters(log, start, end, users)
    table = log.requests(start, end, columns=["user_id", "candidates"], user_ids=user_ids)
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    users_of_rows = np.repeat(table["user_id"].to_numpy().astype(np.int64), lengths)
    return users_of_rows, pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64)


def requesters(log: EventLog, start: datetime, end: datetime, users: UserShard) -> np.ndarray:
    """The ids of ``users`` with a request in ``[start, end)`` (one column of the hour read)."""
    ids = np.unique(log.requests(start, end, columns=["user_id"])["user_id"].to_numpy().astype(np.int64))
    return ids[users.holds(ids)]


def requested_mask(
    user_ids: np.ndarray, item_ids: np.ndarray, requested_users: np.ndarray, requested_items: np.ndarray
) -> np.ndarray:
    """Bool per pair: is it among the requested (user, item) pairs."""
    n = len(user_ids)
    keys, _ = pair_keys(np.r_[user_ids, requested_users], np.r_[item_ids, requested_items])
    return np.isin(keys[:n], keys[n:])


def hit_rate(
    log: EventLog, codes: CodeLog, interval_start: datetime, users: UserShard = EVERY_USER
) -> dict[str, float]:
    """Share of the pairs written for the previous hour that were requested during it (``previous_pairs``:
    how many the previous run wrote, i.e. the FM calls made for that hour)."""
    previous = interval_start - HOUR
    written = codes.read(previous, interval_start, with_codes=False, users=users)
    hits = 0
    if len(written.user_ids):
        requested = requested_pairs(log, previous, interval_start, users)
        hits = int(requested_mask(written.user_ids, written.item_ids, *requested).sum())
    return with_hit_rate({"previous_pairs": len(written.user_ids), "previous_hits": hits})


def with_hit_rate(counts: Mapping[str, float]) -> dict[str, float]:
    """``previous_pairs`` and ``previous_hits`` with their ratio (0 when nothing was written)."""
    pairs, hits = int(counts["previous_pairs"]), int(counts["previous_hits"])
    return {"hit_rate": hits / pairs if pairs else 0.0, "previous_pairs": pairs, "previous_hits": hits}


def hit_rate_ttl(
    log: EventLog, codes: CodeLog, interval_start: datetime, ttl_hours: int, users: UserShard = EVERY_USER
) -> dict[str, float]:
    """Of the pairs the run at ``w = interval_start - ttl_hours`` wrote, each fresh over ``[w, its expiry)``
    (:mod:`.expiry`: at the latest ``interval_start``, so every window has ended), the share requested as a
    candidate at any time in its window.

    ``ttl_pairs``/``ttl_hits`` are the counts (to pool over hours); no ``hit_rate_ttl`` when that run wrote
    nothing. ``ttl_hours`` is this run's TTL, assumed to be the earlier run's.
    """
    written_at = interval_start - ttl_hours * HOUR
    written = codes.read(written_at, written_at + HOUR, with_codes=False, users=users)
    expires = expires_of(written, ttl_hours)
    hits = np.zeros(len(expires), bool)
    for hour in (written_at + k * HOUR for k in range(ttl_hours) if len(expires)):  # each hour read once
        fresh = expires > to_micros(hour, "hour")
        requested = requested_pairs(log, hour, hour + HOUR, users)
        hits |= fresh & requested_mask(written.user_ids, written.item_ids, *requested)
    return with_ttl_hit_rate({"ttl_pairs": len(hits), "ttl_hits": int(hits.sum())})


def with_ttl_hit_rate(counts: Mapping[str, float]) -> dict[str, float]:
    """``ttl_pairs`` and ``ttl_hits`` with ``hit_rate_ttl``, left out when the run wrote nothing."""
    pairs, hits = int(counts["ttl_pairs"]), int(counts["ttl_hits"])
    return {"ttl_pairs": pairs, "ttl_hits": hits} | ({"hit_rate_ttl": hits / pairs} if pairs else {})


def requested_labels(
    log: EventLog, scores: ScoreLog, interval_start: datetime, ttl_hours: int, users: UserShard = EVERY_USER
) -> pa.Table:
    """Every pair the run at ``w = interval_start - ttl_hours`` scored for ``users``, selected or not: its user,
    its score and whether it was requested as a candidate in ``[w, w + ttl)``, the window it would have been
    (or was) fresh in."""
    scored_at = interval_start - ttl_hours * HOUR
    pool = scores.read(scored_at, scored_at + HOUR)
    pool = pool if users.every_user else pool.subset(users.holds(pool.user_ids))
    label = np.zeros(len(pool.user_ids), bool)
    if len(label):
        requested = requested_pairs(log, scored_at, interval_start, users)
        label = requested_mask(pool.user_ids, pool.item_ids, *requested)
    return pa.table({"user_id": pool.user_ids, "score": pool.scores, "requested": label})


def requested_auc(log: EventLog, scores: ScoreLog, interval_start: datetime, ttl_hours: int) -> dict[str, float]:
    """:func:`auc_of_labels` over :func:`requested_labels` of every user."""
    return auc_of_labels(requested_labels(log, scores, interval_start, ttl_hours))


def auc_of_labels(labels: pa.Table) -> dict[str, float]:
    """AUC of the verifier's score for "requested while it would have been fresh" over the scored pool
    (``scored_pairs``; ``scored_requested`` of them positive): it judges the ranking, not what the run chose.

    No ``requested_auc`` when either label is missing: an AUC there is undefined, and a stand-in 0.5 would
    read as a useless selector.
    """
    label = labels["requested"].to_numpy(zero_copy_only=False).astype(bool)
    found: dict[str, float] = {"scored_pairs": len(label), "scored_requested": int(label.sum())}
    if 0 < label.sum() < len(label):
        found["requested_auc"] = rank_auc(label, labels["score"].to_numpy())
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


def hour_counts(
    store: FeatureStore,
    version: str,
    log: EventLog,
    codes: CodeLog,
    interval_start: datetime,
    ttl_hours: int,
    users: UserShard = EVERY_USER,
) -> dict[str, int]:
    """The counts of ``users`` that every figure but the AUC is a ratio of (its labels:
    :func:`requested_labels`); summed over user shards they are the counts of every user."""
    found = coverage_counts(store, version, log, interval_start, users)
    found |= hit_rate(log, codes, interval_start, users) | hit_rate_ttl(log, codes, interval_start, ttl_hours, users)
    return {key: int(value) for key, value in found.items() if key in HOUR_COUNTS}


def figures_of(counts: Mapping[str, int], labels: pa.Table) -> dict[str, float]:
    """Every figure of this module from :func:`hour_counts` and :func:`requested_labels` (each over the
    same users), as the ``coverage`` step records them."""
    found = coverage_shares(counts, fm_calls=int(counts["previous_pairs"]))
    found |= with_hit_rate(counts) | with_ttl_hit_rate(counts) | auc_of_labels(labels)
    ceiling = hit_ceiling(pool_requested(found, int(found["ttl_pairs"])), int(found["ttl_pairs"]))
    return found | ({"hit_ceiling_ttl": ceiling} if ceiling is not None else {})


def figures(
    store: FeatureStore,
    version: str,
    log: EventLog,
    codes: CodeLog,
    interval_start: datetime,
    ttl_hours: int,
) -> dict[str, float]:
    """Every figure of this module for the run at ``interval_start``, counted over every user in one pass."""
    counts = hour_counts(store, version, log, codes, interval_start, ttl_hours)
    return figures_of(counts, requested_labels(log, codes.score_log, interval_start, ttl_hours))


def coverage_counts(
    store: FeatureStore, version: str, log: EventLog, interval_start: datetime, users: UserShard = EVERY_USER
) -> dict[str, int]:
    """Of the last hour's served (request, candidate) rows of ``users`` (``served_pairs``), how many each tier
    covered (``covered_<tier>``, ``covered_any``) and how many it fed first in
    :data:`~solaris.enrichment.tiers.FED_BY` (``fed_first_<tier>``)."""
    users_of_rows, items = requested_pairs(log, interval_start - HOUR, interval_start, users)
    found = {"served_pairs": len(users_of_rows)}
    if not len(users_of_rows):
        return found | {key: 0 for key in COVERAGE_COUNTS if key != "served_pairs"}
    cohorts = log_cohorts(log, users_of_rows)
    read = store.read_tiers_batch(version, users_of_rows, items, interval_start - INSTANT, cohorts=cohorts)
    masks = presence(read)
    found |= {f"covered_{tier}": int(mask.sum()) for tier, mask in masks.items()}
    found["covered_any"] = int(np.logical_or.reduce(list(masks.values())).sum())
    fed = np.bincount(feeding_tier(read), minlength=len(TIER_NAMES))
    return found | {f"fed_first_{tier}": int(fed[k]) for k, tier in enumerate(FED_BY)}


def coverage_shares(counts: Mapping[str, int], fm_calls: int | None = None) -> dict[str, float]:
    """Per tier, the share of the served pairs it covered (``coverage_<tier>``), ``_any``, and
    ``coverage_first_<tier>``: the share it fed first. ``covered_pair_candidates``: the served rows with a
    fresh pair code. Given ``fm_calls``, the FM calls made for that hour (the pairs the previous run wrote,
    ``previous_pairs`` of :func:`hit_rate`: in a steady state what one hour of the precompute costs), also
    ``fm_calls_per_covered_candidate`` and ``covered_candidates_per_fm_call``; each left out where its divisor
    is 0. Every share is 0 in an hour nobody was served.
    """
    served = int(counts["served_pairs"])
    found: dict[str, float] = {"served_pairs": served}
    found |= {f"coverage_{tier}": share(counts[f"covered_{tier}"], served) for tier in (*FED_BY, "any")}
    found |= {f"coverage_first_{tier}": share(counts[f"fed_first_{tier}"], served) for tier in FED_BY}
    return found | calls_per_covered_candidate(int(counts["covered_pair"]), fm_calls)


def share(part: int, whole: int) -> float:
    return part / whole if whole else 0.0


def calls_per_covered_candidate(covered: int, fm_calls: int | None) -> dict[str, float]:
    """``covered_pair_candidates`` and, with ``fm_calls``, both ratios where their divisor is not 0."""
    found: dict[str, float] = {"covered_pair_candidates": covered}
    if fm_calls is not None and covered:
        found["fm_calls_per_covered_candidate"] = fm_calls / covered
    if fm_calls:
        found["covered_candidates_per_fm_call"] = covered / fm_calls
    return found
