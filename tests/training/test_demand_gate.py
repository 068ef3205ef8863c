"""The demand model's gate: a challenger with a lower AUC than the champion's on the same rows is not promoted."""

from __future__ import annotations

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute.params import PrecomputeParams
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION, DEMAND_MODEL
from solaris.training.demand import _gate
from solaris.training.demand_fit import DemandPlan, rows_for, training_hours
from solaris.training.jobs import TrainReport, World


def test_a_worse_demand_challenger_keeps_the_champion(trained: tuple[Settings, World, TrainReport]) -> None:
    settings = trained[0]
    client: MlflowClient = registry.connect(settings)
    champion = str(client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION).version)
    log = EventLog(settings.world_dir("tiny"))
    ttl = PrecomputeParams.ttl_hours
    _, valid = training_hours(log.end, ttl, DemandPlan(train_hours=1, valid_hours=2))
    rows = rows_for(log, valid, ttl, 1.0, seed=0)

    refused = _gate(client, champion, 0.0, rows.features, rows.labels)  # an AUC no model can be below

    assert not refused.promoted and "< champion" in refused.reason
    assert str(client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION).version) == champion
    kept = _gate(client, champion, 1.0, rows.features, rows.labels)  # at least the champion's: promoted
    assert kept.promoted and str(client.get_model_version_by_alias(DEMAND_MODEL, CHAMPION).version) == champion
