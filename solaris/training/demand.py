"""``train demand``: the speculation's request model, trained on the hours before ``until``, registered as
``solaris-demand`` and promoted on its own gate.

It is not part of the FM -> AE -> VM chain: it reads only the request log, so it is promoted alone, when its
AUC on the validation hours is at least the champion's on the same rows (or there is no champion). The
per-fallback gains come from features as served when given (:mod:`solaris.training.demand_gains`); without them
every fallback weighs the same and the selector ranks by demand alone.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.models import metrics
from solaris.models.demand import DemandModel, predict
from solaris.precompute.demand_features import NAMES, columns
from solaris.tracking import registry
from solaris.tracking.registry import CHALLENGER, CHAMPION, DEMAND_MODEL
from solaris.training import runs
from solaris.training.demand_fit import DemandPlan, train_demand, with_gains

EXPERIMENT = "solaris-train-demand"


@dataclass(frozen=True)
class DemandDecision:
    version: str
    promoted: bool
    reason: str
    auc: float


def train_demand_job(
    client: MlflowClient,
    settings: Settings,
    log: EventLog,
    until: datetime,
    ttl_hours: int,
    plan: DemandPlan = DemandPlan(),
    gains: dict[str, float] | None = None,
) -> DemandDecision:
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, EXPERIMENT))
    with mlflow.start_run(run_name="demand"):
        runs.log_params(
            {
                **plan.fit.as_params(),
                "train_hours": plan.train_hours,
                "valid_hours": plan.valid_hours,
                "negative_rate": plan.negative_rate,
                "ttl_hours": ttl_hours,
                "until": until.isoformat(),
            }
        )
        trained = train_demand(log, until, ttl_hours, plan, runs.log_epoch)
        model = with_gains(trained.model, gains or {})
        runs.log_fit(trained.fit, "demand")
        mlflow.log_metrics({f"valid_{k}": v for k, v in trained.metrics.items()})
        tags = {
            "role": "demand",
            "trained_until": until.isoformat(),
            "ttl_hours": ttl_hours,
            "valid_auc": f"{trained.metrics['auc']:.6f}",
            "gains_from": "served" if gains else "none",
        }
        example = columns(trained.valid.features[:5], model.config.features)
        version = registry.log_model(client, model, DEMAND_MODEL, model.config.columns(), example, tags)
    registry.set_alias(client, DEMAND_MODEL, CHALLENGER, version)
    return _gate(client, version, trained.metrics["auc"], trained.valid.features, trained.valid.labels)


def _gate(client: MlflowClient, version: str, auc: float, features: np.ndarray, labels: np.ndarray) -> DemandDecision:
    """Promote when the challenger's validation AUC is at least the champion's on the same rows (``features``:
    every column of ``NAMES``; each model reads its own, so a champion from before a feature was added is
    still compared)."""
    champion = registry.version_by_alias(client, DEMAND_MODEL, CHAMPION)
    reason = "first demand model"
    if champion is not None:
        current = registry.load_demand(str(champion.version))
        if isinstance(current, DemandModel) and set(current.config.features) <= set(NAMES):
            champion_auc = metrics.auc(labels, predict(current, columns(features, current.config.features)))
            if auc < champion_auc:
                return DemandDecision(
                    version, False, f"AUC {auc:.4f} < champion v{champion.version}'s {champion_auc:.4f}", auc
                )
            reason = f"AUC {auc:.4f} at least champion v{champion.version}'s {champion_auc:.4f}"
        else:
            reason = f"champion v{champion.version} is not a demand model this code can score"
    registry.set_alias(client, DEMAND_MODEL, CHAMPION, version)
    return DemandDecision(version, True, reason, auc)
