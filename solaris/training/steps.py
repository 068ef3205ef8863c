"""The training chain cut into steps that pass only registered versions, for the ``solaris_train`` DAG.

:func:`solaris.training.jobs.train_all` runs the chain in one process with the models in memory; a DAG's
tasks may run on different workers, so each step here reloads what it needs from the MLflow registry by
version and returns a small JSON-able dict for XCom.
"""

from __future__ import annotations

from dataclasses import replace
from datetime import datetime
from typing import Any

from solaris.config import Settings
from solaris.models.training import FitConfig
from solaris.tracking import registry
from solaris.training.gate import promotion_gate
from solaris.training.jobs import (
    TrainPlan,
    World,
    champion_ne,
    registered,
    registered_teacher,
    train_ae_job,
    train_fm_job,
    train_vm_job,
    vm_data,
)
from solaris.tracking.registry import AE_MODEL, FM_MODEL, VM_MODEL, PinnedVersions


def plan(settings: Settings, epochs: int, seed: int) -> TrainPlan:
    return TrainPlan(fit=FitConfig(epochs=epochs, seed=seed, progress=False, threads=1), device=settings.device)


def _world(settings: Settings, chosen: TrainPlan) -> World:
    return World.open(settings.world_dir(), chosen.fractions)


def train_fm(settings: Settings, chosen: TrainPlan) -> dict[str, Any]:
    trained = train_fm_job(registry.connect(settings), settings, _world(settings, chosen), chosen)
    return {"fm_version": trained.version, "ne": trained.metrics["ne"]}


def train_ae(settings: Settings, chosen: TrainPlan, fm_version: str) -> dict[str, Any]:
    client = registry.connect(settings)
    fm = registered(client, FM_MODEL, fm_version)
    trained = train_ae_job(client, settings, _world(settings, chosen), fm, chosen)
    return {"ae_version": trained.version, "reconstruction_error": trained.metrics["reconstruction_error"]}


def train_vms(settings: Settings, chosen: TrainPlan, ae_version: str) -> dict[str, Any]:
    """Every VM variant on one teacher pass; the served variant's version and NE go to the gate."""
    client = registry.connect(settings)
    world = _world(settings, chosen)
    data = vm_data(world, registered_teacher(client, ae_version, chosen.device), chosen.served_age_hours)
    versions = {v: train_vm_job(client, settings, world, data, v, chosen) for v in chosen.variants}
    served = versions[chosen.serve_variant]
    return {
        "vm_versions": {v: t.version for v, t in versions.items()},
        "served_vm": served.version,
        "served_ne": served.metrics["ne"],
        "eval_hours": str(world.split.eval),
    }


def gate(
    settings: Settings, chosen: TrainPlan, fm_version: str, ae_version: str, vms: dict[str, Any]
) -> dict[str, Any]:
    """Promote FM, AE and the served VM together if the VM beats the champion on the same hours; a chain with a
    new embedding version is written in shadow first (:mod:`solaris.precompute.shadow`)."""
    client = registry.connect(settings)
    ae_fm = client.get_model_version(AE_MODEL, ae_version).tags.get("fm_version")
    if ae_fm != fm_version:
        raise ValueError(f"{AE_MODEL} version {ae_version} compresses FM {ae_fm}, not FM {fm_version}")
    embedding = client.get_model_version(VM_MODEL, vms["served_vm"]).tags["embedding_version"]
    challenger = PinnedVersions(fm_version, ae_version, vms["served_vm"], embedding)
    world = _world(settings, chosen)
    decision = promotion_gate(
        client, settings, challenger, vms["served_ne"], vms["eval_hours"],
        lambda champion: champion_ne(world, champion, chosen.device, chosen.served_age_hours),
    )  # fmt: skip
    return {
        "promoted": decision.promoted, "awaiting_shadow": decision.awaiting_shadow, "reason": decision.reason,
        "embedding_version": embedding,
    }  # fmt: skip


def train_demand(settings: Settings, until: datetime, ttl_hours: int, seed: int) -> dict[str, Any]:
    """The demand model on the request log's hours before ``until`` (the run's logical time, at most the
    log's end), with per-cohort gains from the last day's features as served, promoted on its own gate."""
    from solaris.data.eventlog import EventLog
    from solaris.training.demand_fit import DemandPlan
    from solaris.training.demand import train_demand_job
    from solaris.training.demand_gains import served_gains

    log = EventLog(settings.world_dir())
    until = min(until, log.end)
    plan = DemandPlan(fit=replace(DemandPlan().fit, seed=seed))
    client = registry.connect(settings)
    gains = {}
    champion = registry.version_by_alias(client, VM_MODEL, registry.CHAMPION)
    if champion is not None:  # what a pair code gained the served VM over the last day, per cohort
        gains = served_gains(log, settings.data_dir / "served", registry.load_vm(str(champion.version)), until)
    decision = train_demand_job(client, settings, log, until, ttl_hours, plan, gains)
    return {"demand_version": decision.version, "promoted": decision.promoted, "reason": decision.reason, "auc": decision.auc}
