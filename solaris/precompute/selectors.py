"""The two ways a run chooses the pairs the FM embeds, by the ``selector`` parameter.

- ``verifier``: the paper's. The pinned VM scores each candidate (position 0, every tier absent), the best
  ``top_fraction`` go to the FM, re-queued misses are forced on top (:mod:`.verifier`, the pool from :mod:`.fm_pool`).
- ``budget``: the pinned demand model predicts which pairs will be requested while fresh, weighted by what a
  pair code adds over the user's lower tiers, and the best ``fm_budget`` pairs go, re-queue included, none
  less likely to be requested than ``min_demand`` (:mod:`solaris.precompute.budget`).

Each scores one user shard's pool (``score``: what the selector ranks by, kept in the score log), ranks it
by its rule, and says how many pairs its rule takes over all shards (:mod:`.selection` takes them). Neither
reads store features: they change as the run writes, and a rerun must choose alike. Each reads the event log
of the shard's users alone.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime, timedelta
from typing import Any

import numpy as np
import pandas as pd

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute.budget import check_budget, rank_by_value
from solaris.precompute.codelog import CodeLog
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.spec import HourRun
from solaris.precompute.staging import StepStaging
from solaris.precompute.verifier import rank_top_fraction, selection_budget
from solaris.vms import registered_name

# Every scoring forward is this many rows, so that a pair's score does not depend on the pairs batched with it:
# a pool split among user shards scores, and so selects, as the whole pool does.
ROWS_A_FORWARD = 8192
Scorer = Callable[[HourRun, Settings, pd.DataFrame, CodeLog, StepStaging], pd.DataFrame]


def verifier_inputs(
    vm: Any, version: str, user_ids: np.ndarray, item_ids: np.ndarray, at: datetime, exposure_raw: np.ndarray
) -> np.ndarray:
    """The VM's input rows for candidate pairs at ``at``: position 0, the counters the ranker will read this
    hour, every embedding tier absent."""
    from solaris.enrichment.tiers import absent, served_inputs
    from solaris.store.codec import to_micros

    n = len(user_ids)
    ts = np.full(n, to_micros(at, "at"), np.int64)
    read = replace(absent(n, vm.config.code_dim), exposure=exposure_raw)
    return served_inputs(vm, version, user_ids, item_ids, ts, np.zeros(n, np.int64), read)


def by_verifier(
    run: HourRun, settings: Settings, pool: pd.DataFrame, codes: CodeLog, stage: StepStaging
) -> pd.DataFrame:
    from solaris.models.vm import VerticalModel, score
    from solaris.precompute.exposures import exposure_index
    from solaris.store.codec import to_micros
    from solaris.tracking import registry

    registry.connect(settings)
    vm = registry.load_vm(run.vm_name, run.vm_version)
    if not isinstance(vm, VerticalModel):
        raise ValueError(f"{registered_name(run.vm_name)} version {run.vm_version} is not a SOLARIS vertical model")
    users, items = pool["user_id"].to_numpy(np.int64), pool["item_id"].to_numpy(np.int64)
    at = run.interval_start
    index = exposure_index(EventLog(settings.world_dir()), at, users)
    counts = index.exposure_raw(users, items, np.full(len(users), to_micros(at, "at")))
    inputs = verifier_inputs(vm, run.embedding_version, users, items, at, counts)
    return pool.assign(score=score(vm, inputs, fixed_rows=ROWS_A_FORWARD))


def with_aggregate(codes: CodeLog, users: np.ndarray, at: datetime, window_hours: int) -> np.ndarray:
    """Whether each user has pair codes in the aggregate's window before ``at`` (so an aggregate serves them
    this hour whatever this run writes): the code log's earlier hours, which this run never rewrites."""
    earlier = codes.read(at - timedelta(hours=window_hours - 1), at)
    return np.isin(users, earlier.user_ids)


def by_budget(run: HourRun, settings: Settings, pool: pd.DataFrame, codes: CodeLog, stage: StepStaging) -> pd.DataFrame:
    from solaris.models.demand import DemandModel, predict
    from solaris.precompute.budget import pair_values
    from solaris.precompute.demand_features import ItemListings, columns, demand_features
    from solaris.precompute.pipeline import ITEM_LISTINGS
    from solaris.tracking import registry

    if run.demand_version is None:
        raise ValueError("selector budget needs a pinned solaris-demand version; the run record has none")
    registry.connect(settings)
    model = registry.load_demand(run.demand_version)
    if not isinstance(model, DemandModel):
        raise ValueError(f"solaris-demand version {run.demand_version} is not a SOLARIS demand model")
    if model.config.ttl_hours != run.params.ttl_hours:
        raise ValueError(
            f"solaris-demand version {run.demand_version} predicts requests within {model.config.ttl_hours} h, but "
            f"this run's ttl_hours is {run.params.ttl_hours}: train one with --ttl-hours {run.params.ttl_hours}"
        )
    users = pool["user_id"].to_numpy(np.int64)
    listings = ItemListings.from_table(stage.read(ITEM_LISTINGS))
    features = columns(
        demand_features(EventLog(settings.world_dir()), pool, run.interval_start, run.params.ttl_hours, listings),
        model.config.features,
    )
    gain = model.config.gain(with_aggregate(codes, users, run.interval_start, run.params.window_hours))
    demand = predict(model, features, fixed_rows=ROWS_A_FORWARD)
    return pool.assign(demand=demand, score=pair_values(demand, gain))


@dataclass(frozen=True)
class Selector:
    score: Scorer  # the shard's pool with what it adds (``adds``), by which its rule ranks
    adds: tuple[str, ...]
    rank: Callable[[pd.DataFrame, PrecomputeParams], pd.DataFrame]  # :func:`~.selection.ranked`, by its rule
    quota: Callable[[PrecomputeParams, int], int]  # pairs taken, given the speculative pairs over all shards

    def rank_pool(
        self, run: HourRun, settings: Settings, pool: pd.DataFrame, codes: CodeLog, stage: StepStaging
    ) -> pd.DataFrame:
        """The ranked pool; an empty shard (more shards than users) gets the columns without loading a model."""
        if pool.empty:
            scored = pool.assign(**{column: np.zeros(0, np.float32) for column in self.adds})
        else:
            scored = self.score(run, settings, pool, codes, stage)
        return self.rank(scored, run.params)


def _budget_quota(params: PrecomputeParams, speculative: int) -> int:
    check_budget(params.fm_budget, params.min_demand)
    return params.fm_budget


SELECTORS: dict[str, Selector] = {
    "verifier": Selector(
        by_verifier,
        ("score",),
        lambda scored, p: rank_top_fraction(scored, p.per_user_cap),
        lambda p, speculative: selection_budget(speculative, p.top_fraction),
    ),
    "budget": Selector(
        by_budget, ("demand", "score"), lambda scored, p: rank_by_value(scored, p.min_demand), _budget_quota
    ),
}
