"""From scored candidates to the pairs the FM embeds this run: verifier selection, re-queue, freshness.

The FM is the expensive step, so it only sees pairs that need it: the verifier's best fraction of the
speculative candidates, plus the pairs that were requested in the last hour and found no fresh embedding
(the paper's re-queue), minus pairs whose stored embedding will still be fresh when the coming interval ends.

Re-queued pairs are forced: they are observed demand, not speculation, so the verifier cannot reject them,
they do not count against ``top_fraction`` and are not limited by ``per_user_cap``; the budget and the cap
apply to the speculative pairs only. They are still scored, because the store keeps every pair's verifier
score. The intended order: ``add_requeued`` -> ``drop_still_fresh`` -> verifier scores ->
``select_top_fraction`` (dropping fresh pairs first spends the budget only on pairs that need the FM).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta

import numpy as np
import pandas as pd
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR, as_utc
from solaris.precompute.candidates import SOURCES

# The store's ``fresh_pairs`` with the embedding version bound: (user_ids, item_ids, t) -> bool mask of the
# pairs that hold an embedding with created_at <= t < expires_at.
FreshMask = Callable[[np.ndarray, np.ndarray, datetime], np.ndarray]

REQUEUE = "requeue"


def _pair_arrays(pairs: pd.DataFrame, what: str) -> tuple[np.ndarray, np.ndarray]:
    missing = [c for c in ("user_id", "item_id") if c not in pairs.columns]
    if missing:
        raise ValueError(f"{what}: missing column(s) {', '.join(missing)}")
    return pairs["user_id"].to_numpy(np.int64), pairs["item_id"].to_numpy(np.int64)


def _checked_mask(mask: np.ndarray, n: int) -> np.ndarray:
    mask = np.asarray(mask)
    if mask.shape != (n,) or mask.dtype != np.bool_:
        raise ValueError(f"fresh mask must be a bool array of shape ({n},), got {mask.dtype} {mask.shape}")
    return mask


def selection_budget(n_pairs: int, top_fraction: float) -> int:
    """``ceil(top_fraction * n_pairs)``: any candidate with a positive fraction sends at least one pair.

    The product is rounded to 9 decimals first so that float noise (0.7 * 10 = 7.000000000000001) cannot
    add a pair.
    """
    if not 0 < top_fraction <= 1:
        raise ValueError(f"top_fraction must be in (0, 1], got {top_fraction}")
    return math.ceil(round(top_fraction * n_pairs, 9))


def add_requeued(candidates: pd.DataFrame, requeued: pd.DataFrame) -> pd.DataFrame:
    """The run's pool ``[user_id, item_id, source]``: candidates plus re-queued pairs, each pair once.

    A pair that is both a candidate and a re-queued miss is labelled ``requeue``, so it is forced.
    """
    categories = [*SOURCES, REQUEUE]
    parts = [
        pd.DataFrame({"user_id": u, "item_id": i, "source": pd.Categorical(src, categories=categories)})
        for (u, i), src in (
            (_pair_arrays(requeued, "re-queued pairs"), [REQUEUE] * len(requeued)),
            (_pair_arrays(candidates, "candidates"), candidates["source"].astype(str)),
        )
    ]
    return pd.concat(parts, ignore_index=True).drop_duplicates(["user_id", "item_id"], ignore_index=True)


def select_top_fraction(
    scored: pd.DataFrame, top_fraction: float = 0.2, per_user_cap: int | None = 50
) -> pd.DataFrame:
    """The pairs to embed: every forced pair, then the best speculative pairs by verifier ``score``.

    Forced pairs are the rows whose ``source`` is ``requeue`` (none without a source column). Of the
    ``n`` speculative rows, exactly ``selection_budget(n, top_fraction)`` are taken (fewer only when the
    cap leaves fewer eligible), best score first, skipping any pair that would give its user more than
    ``per_user_cap`` speculative pairs. Ties go to the lower user id, then the lower item id, so a rerun
    selects the same pairs. Returns the chosen rows, forced first, with a bool ``forced`` column added.
    """
    users, items = _pair_arrays(scored, "scored pairs")
    if "score" not in scored.columns:
        raise ValueError("scored pairs: missing column score (the verifier's output)")
    scores = scored["score"].to_numpy(np.float64)
    bad = np.flatnonzero(~np.isfinite(scores))
    if len(bad):
        i = bad[0]
        raise ValueError(f"scored pairs: row {i} (user {users[i]}, item {items[i]}) has score {scores[i]}")
    repeated = np.flatnonzero(scored.duplicated(["user_id", "item_id"]).to_numpy())
    if len(repeated):
        i = repeated[0]
        raise ValueError(f"scored pairs: row {i} repeats pair (user {users[i]}, item {items[i]})")
    if per_user_cap is not None and per_user_cap < 1:
        raise ValueError(f"per_user_cap must be at least 1 or None, got {per_user_cap}")
    forced = np.zeros(len(users), bool)
    if "source" in scored.columns:
        forced = (scored["source"] == REQUEUE).to_numpy()
    ranked = scored[~forced].sort_values(
        ["score", "user_id", "item_id"], ascending=[False, True, True], kind="stable"
    )
    if per_user_cap is not None:
        ranked = ranked[ranked.groupby("user_id").cumcount() < per_user_cap]
    chosen = ranked.head(selection_budget(int((~forced).sum()), top_fraction))
    return pd.concat(
        [scored[forced].assign(forced=True), chosen.assign(forced=False)], ignore_index=True
    )


def requeue_misses(
    log: EventLog, interval_start: datetime, fresh: FreshMask, lookback: timedelta = HOUR
) -> pd.DataFrame:
    """Pairs requested in ``[interval_start - lookback, interval_start)`` with no fresh embedding at
    ``interval_start``: ``[user_id, item_id, source="requeue"]``, distinct.

    Freshness is checked once, at ``interval_start``, in one batched call: a pair missed when requested but
    embedded since is not queued again, and a pair that was covered when requested but has expired since
    is queued, since the coming interval will miss it too.
    """
    start = as_utc(interval_start)
    table = log.requests(start - lookback, start, columns=["user_id", "candidates"])
    lists = table["candidates"].combine_chunks()
    lengths = pc.list_value_length(lists).to_numpy(zero_copy_only=False)
    pairs = pd.DataFrame(
        {
            "user_id": np.repeat(table["user_id"].to_numpy(), lengths).astype(np.int64),
            "item_id": pc.list_flatten(lists).to_numpy(zero_copy_only=False).astype(np.int64),
        }
    ).drop_duplicates(ignore_index=True)
    users, items = pairs["user_id"].to_numpy(), pairs["item_id"].to_numpy()
    covered = _checked_mask(fresh(users, items, start), len(pairs))
    return pairs[~covered].reset_index(drop=True).assign(source=REQUEUE)


def drop_still_fresh(pairs: pd.DataFrame, fresh: FreshMask, until: datetime) -> pd.DataFrame:
    """``pairs`` without those whose stored embedding is still fresh at ``until``.

    Pass the end of the interval the new embeddings will serve: a pair fresh until then gains nothing from
    being recomputed now, while one expiring earlier would leave a gap before the next run.
    """
    users, items = _pair_arrays(pairs, "pairs")
    still_fresh = _checked_mask(fresh(users, items, as_utc(until)), len(pairs))
    return pairs[~still_fresh].reset_index(drop=True)
