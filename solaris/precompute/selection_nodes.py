"""The selection's three steps: each user shard scores and ranks its pool, one task finds the cut over every
shard, each shard takes its pairs up to it (:mod:`.selection`), with their users' history for the FM.

No task holds more than one shard's pool; the cut's task holds each shard's head, at most the quota's rows.
"""

from __future__ import annotations

import numpy as np

from solaris.config import Settings
from solaris.precompute.embedding import history_table
from solaris.precompute.pipeline import CUT, HISTORY, POOL, SCORED, SELECTED, USER_SHARDS
from solaris.precompute.run_files import (
    FM_BUDGET_COUNT,
    TTL_HOURS_COUNT,
    Meta,
    code_log,
    event_log,
    shard_count,
    step_staging,
    timed,
)
from solaris.precompute.selection import CUT_COLUMNS, ELIGIBLE, FORCED, RANK_CLASS, cut_of, take
from solaris.precompute.selectors import SELECTORS
from solaris.precompute.spec import HourRun


def score(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The shard's pool scored by the run's ``selector`` and ranked by its rule."""
    with timed({"shard": shard}) as meta:
        stage = step_staging(settings, run, "score")
        pool = stage.read(POOL, shard).to_pandas()
        scored = SELECTORS[run.params.selector].rank_pool(run, settings, pool, code_log(settings, run), stage)
        meta["scored"] = stage.write(SCORED, scored, shard)["rows"]
    return meta


def cut(run: HourRun, settings: Settings) -> Meta:
    """The last pair the selector's quota reaches over every user shard; clears the hour's score log, which
    the shards then write."""
    with timed({}) as meta:
        stage = step_staging(settings, run, "cut")
        shards = range(shard_count(run, USER_SHARDS))
        classes = [stage.read(SCORED, s, columns=[RANK_CLASS])[RANK_CLASS].to_numpy() for s in shards]
        eligible = [int((c == ELIGIBLE).sum()) for c in classes]
        speculative = sum(int((c != FORCED).sum()) for c in classes)
        quota = SELECTORS[run.params.selector].quota(run.params, speculative)
        heads = [stage.read(SCORED, s, columns=CUT_COLUMNS, rows=min(eligible[s], quota)).to_pandas() for s in shards]
        stage.write(CUT, cut_of(heads, quota, sum(eligible)))
        code_log(settings, run).score_log.clear_hour(run.interval_start)
        meta["eligible"] = sum(eligible)
        meta[TTL_HOURS_COUNT] = run.params.ttl_hours
        if run.params.selector == "budget":  # the verifier spends a share of the pool instead
            meta[FM_BUDGET_COUNT] = run.params.fm_budget
    return meta


def select(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The shard's pairs up to the cut, for the FM, with its users' history; its scored pool to the score log."""
    with timed({"shard": shard}) as meta:
        stage = step_staging(settings, run, "select")
        ranking = stage.read(SCORED, shard).to_pandas()
        chosen = take(ranking, stage.read(CUT).to_pandas())
        code_log(settings, run).score_log.write_pool(run.interval_start, ranking, chosen, shard)
        stage.write(SELECTED, chosen, shard)
        users = np.unique(chosen["user_id"].to_numpy(np.int64))
        history = history_table(event_log(settings), users, run.interval_start, run.params.history_hours)
        meta["history_rows"] = stage.write(HISTORY, history, shard)["rows"]
        meta |= {"selected": len(chosen), "forced": int(chosen["forced"].sum())}
    return meta
