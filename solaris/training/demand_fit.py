"""Learning the demand model from the request log, on past hours only.

Each training hour ``t`` is what a precompute run at ``t`` would have scored: the candidate generator's
pool plus the pairs requested in the hour before (the re-queue), with :mod:`.features` as of ``t``, and the
label "requested as a candidate in ``[t, t + ttl)``". A model trained ``until`` a time uses only hours whose
label window closes by then, so nothing it learns comes from at or after ``until``.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime

import numpy as np
import pandas as pd
import torch
from torch.nn import functional as F

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR, floor_hour
from solaris.models import metrics
from solaris.models.demand import DemandConfig, DemandModel, predict
from solaris.models.features import pair_key
from solaris.models.training import Batch, EpochHook, FitConfig, FitResult, fit, seed_everything
from solaris.precompute.candidates import generate_candidates
from solaris.precompute.demand_features import NAMES, columns, demand_features
from solaris.precompute.fm_pool import add_requeued
from solaris.precompute.quality import requested_pairs


@dataclass(frozen=True)
class DemandPlan:
    train_hours: int = 24  # a day: every hour of the day's traffic pattern once
    valid_hours: int = 3
    negative_rate: float = 0.2  # share of negative rows kept (every positive is kept)
    features: tuple[str, ...] = NAMES  # a subset for ablations; the model records the names it reads
    fit: FitConfig = FitConfig(epochs=8, patience=2, lr=2e-3, batch_size=4096, progress=False, threads=1)

    def __post_init__(self) -> None:
        if self.train_hours < 1 or self.valid_hours < 1 or not 0 < self.negative_rate <= 1:
            raise ValueError(f"demand plan: hours must be >= 1 and negative_rate in (0, 1], got {self}")
        unknown = set(self.features) - set(NAMES)
        if not self.features or unknown:
            raise ValueError(f"demand plan: features must be a non-empty subset of {NAMES}, unknown: {sorted(unknown)}")


@dataclass(frozen=True)
class Rows:
    features: np.ndarray  # [n, features] float32
    labels: np.ndarray  # [n] float32


def labelled_pool(log: EventLog, at: datetime, ttl_hours: int) -> tuple[pd.DataFrame, np.ndarray]:
    """The pool a run at ``at`` would score, and whether each pair was requested in ``[at, at + ttl)``."""
    found = generate_candidates(log, at, at + HOUR)
    users, items = requested_pairs(log, at - HOUR, at)
    pool = add_requeued(found, pd.DataFrame({"user_id": users, "item_id": items}))
    later_users, later_items = requested_pairs(log, at, at + ttl_hours * HOUR)
    keys = pair_key(pool["user_id"].to_numpy(np.int64), pool["item_id"].to_numpy(np.int64))
    return pool, np.isin(keys, pair_key(later_users, later_items))


def hour_rows(log: EventLog, at: datetime, ttl_hours: int, negative_rate: float, rng: np.random.Generator) -> Rows:
    pool, requested = labelled_pool(log, at, ttl_hours)
    keep = requested | (rng.random(len(pool)) < negative_rate)
    pool, requested = pool[keep], requested[keep]
    x = demand_features(log, pool, at, ttl_hours)
    return Rows(x, requested.astype(np.float32))


def training_hours(until: datetime, ttl_hours: int, plan: DemandPlan) -> tuple[list[datetime], list[datetime]]:
    """(train, valid) hours: the last ``train + valid`` hours whose label window ``[t, t + ttl)`` ends by
    ``until``; validation takes the latest."""
    last = floor_hour(until) - ttl_hours * HOUR
    hours = [last - i * HOUR for i in range(plan.train_hours + plan.valid_hours)][::-1]
    return hours[: plan.train_hours], hours[plan.train_hours :]


def rows_for(log: EventLog, hours: list[datetime], ttl_hours: int, negative_rate: float, seed: int) -> Rows:
    """Every feature of :data:`NAMES` per row: a model picks its own columns by name (``columns``)."""
    rng = np.random.default_rng(seed)
    parts = [hour_rows(log, h, ttl_hours, negative_rate, rng) for h in hours if h >= log.start]
    if not parts:
        raise ValueError(f"no request-log hours to train the demand model on (log starts {log.start.isoformat()})")
    return Rows(np.concatenate([p.features for p in parts]), np.concatenate([p.labels for p in parts]))


@dataclass(frozen=True)
class TrainedDemand:
    model: DemandModel
    fit: FitResult
    valid: (
        Rows  # every pair of the validation hours, unsampled, every feature: the gate scores the champion on them too
    )
    metrics: dict[str, float]


def train_demand(
    log: EventLog, until: datetime, ttl_hours: int, plan: DemandPlan = DemandPlan(), on_epoch: EpochHook | None = None
) -> TrainedDemand:
    """A demand model from the hours before ``until``, with its validation figures: AUC and log loss, and
    ``recency_auc``, the AUC of a trivial score (the user's last request, newest first) for reference."""
    train_hours, valid_hours = training_hours(until, ttl_hours, plan)
    train = rows_for(log, train_hours, ttl_hours, plan.negative_rate, plan.fit.seed)
    valid = rows_for(log, valid_hours, ttl_hours, 1.0, plan.fit.seed)
    config = DemandConfig(plan.features, ttl_hours=ttl_hours, logit_offset=float(np.log(plan.negative_rate)))
    train_x, valid_x = columns(train.features, plan.features), columns(valid.features, plan.features)
    model, result = fit_demand(config, Rows(train_x, train.labels), Rows(valid_x, valid.labels), plan.fit, on_epoch)
    found = metrics.summary(valid.labels, predict(model, valid_x))
    recency = -valid.features[:, NAMES.index("user_hours_since_last")]
    found["recency_auc"] = metrics.auc(valid.labels, (recency - recency.min()) / max(float(np.ptp(recency)), 1e-9))
    found |= {"valid_rows": float(len(valid.labels)), "train_rows": float(len(train.labels))}
    return TrainedDemand(model, result, valid, found)


def fit_demand(
    config: DemandConfig, train: Rows, valid: Rows, fit_config: FitConfig, on_epoch: EpochHook | None = None
) -> tuple[DemandModel, FitResult]:
    """A demand model fitted to rows whose columns are ``config.features``: the training job's, or an
    ablation's with inputs the request log does not have."""
    if train.labels.min(initial=1) == train.labels.max(initial=0):
        raise ValueError("demand model: the training hours hold only one class (no requests, or every pair requested)")
    seed_everything(fit_config.seed)  # the initial weights too: a rerun trains the same model
    model = DemandModel(config, train.features)
    x, y = torch.as_tensor(train.features), torch.as_tensor(train.labels)
    vx, vy = torch.as_tensor(valid.features), torch.as_tensor(valid.labels)

    def batches(rng: np.random.Generator) -> list[Batch]:
        order = torch.as_tensor(rng.permutation(len(y)))
        return [(x[i], y[i]) for i in order.split(fit_config.batch_size)]

    def loss(m: DemandModel, bx: torch.Tensor, by: torch.Tensor) -> torch.Tensor:
        return F.binary_cross_entropy_with_logits(m.logits(bx), by)

    def validate(m: DemandModel) -> float:  # the offset is constant on the sampled rows: leave it out here
        return float(F.binary_cross_entropy_with_logits(m.logits(vx) + config.logit_offset, vy))

    return model, fit(model, batches, loss, validate, fit_config, "demand", on_epoch)


def with_gains(model: DemandModel, gains: dict[str, float]) -> DemandModel:
    """The same weights with per-fallback gains set (estimated from features as served)."""
    model.config = replace(model.config, **{f"gain_{fallback}": value for fallback, value in gains.items()})
    return model
