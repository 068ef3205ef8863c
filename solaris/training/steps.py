"""The training chain cut into steps that pass only registered versions, for the ``solaris_train`` DAG.

:func:`solaris.training.jobs.train_all` runs the chain in one process with the models in memory; a DAG's
tasks may run on different workers, so each step here reloads what it needs from the MLflow registry by
version and returns a small JSON-able dict for XCom.
"""

from __future__ import annotations

import os
from dataclasses import asdict, replace
from datetime import datetime
from typing import Any

from solaris.config import Settings
from solaris.models.training import FitConfig
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, FM_MODEL, PinnedVersions
from solaris.training.gate import Challenger
from solaris.training.jobs import (
    TrainPlan,
    World,
    champion_teacher,
    gate_challengers,
    registered,
    registered_teacher,
    served_challenger,
    train_ae_job,
    train_fm_job,
    train_vm_variants,
    vm_data,
)
from solaris.vms import ALL_VMS, choose

# CFS weight 15 against a default process's 1024: beside a training task, the precompute keeps ~98% of a core.
TRAINING_NICENESS = 19


def yield_cpu() -> None:
    """Lower this task's CPU priority. On workers shared with the hourly precompute, a day's training must
    not make an hour late: the scheduler skips an hour whose run has not finished (no catchup)."""
    current = os.nice(0)
    if current < TRAINING_NICENESS:
        os.nice(TRAINING_NICENESS - current)


def plan(settings: Settings, epochs: int, seed: int) -> TrainPlan:
    return TrainPlan(fit=FitConfig(epochs=epochs, seed=seed, progress=False, threads=1), device=settings.device)


def _world(settings: Settings, chosen: TrainPlan, until: datetime) -> World:
    """The log's hours before the run's logical time: on a live stack hours keep arriving while the chain
    trains, and every step of one run must see the same ones."""
    return World.open(settings.world_dir(), chosen.fractions, until)


def fm_task(settings: Settings, chosen: TrainPlan, until: datetime) -> dict[str, Any]:
    trained = train_fm_job(registry.connect(settings), settings, _world(settings, chosen, until), chosen)
    return {"fm_version": trained.version, "ne": trained.metrics["ne"]}


def ae_task(settings: Settings, chosen: TrainPlan, until: datetime, fm_version: str) -> dict[str, Any]:
    client = registry.connect(settings)
    fm = registered(client, FM_MODEL, fm_version)
    trained = train_ae_job(client, settings, _world(settings, chosen, until), fm, chosen)
    return {"ae_version": trained.version, "reconstruction_error": trained.metrics["reconstruction_error"]}


def vm_names(settings: Settings, chosen: str) -> list[str]:
    """The VMs a training run trains: every configured one for ``all``, else the one named."""
    specs = settings.vms()
    return [s.name for s in (specs if chosen == ALL_VMS else choose(specs, [chosen]))]


def vm_task(
    settings: Settings, chosen: TrainPlan, until: datetime, vm_name: str, ae_version: str | None
) -> dict[str, Any]:
    """One VM's variants on the AE ``ae_version`` and its FM (None: the champions, the VM trained alone); its
    served variant's version and NE go to the gate."""
    client = registry.connect(settings)
    world = _world(settings, chosen, until)
    if ae_version is None:
        teacher = champion_teacher(client, chosen.device)
    else:
        teacher = registered_teacher(client, ae_version, chosen.device)
    (spec,) = choose(settings.vms(), [vm_name])
    variants = train_vm_variants(
        client, settings, world, vm_data(world, teacher, chosen.served_age_hours), spec, chosen
    )
    challenger = served_challenger(spec, variants, teacher, chosen)
    return {
        "vm": vm_name,
        "versions": {v: t.version for v, t in variants.items()},
        "chain": asdict(challenger.chain),
        "served_ne": challenger.ne,
        "eval_hours": str(world.split.eval),
    }


def gate(settings: Settings, chosen: TrainPlan, until: datetime, vms: list[dict[str, Any]]) -> dict[str, Any]:
    """Gate the VMs trained (one chain of a new FM and AE, or one VM alone on the champions'); a chain with a
    new embedding version is written in shadow first (:mod:`solaris.precompute.shadow`)."""
    client = registry.connect(settings)
    challengers = [Challenger(PinnedVersions(**trained["chain"]), trained["served_ne"]) for trained in vms]
    for fm, ae in {(c.chain.fm, c.chain.ae) for c in challengers}:
        ae_fm = client.get_model_version(AE_MODEL, ae).tags.get("fm_version")
        if ae_fm != fm:
            raise ValueError(f"{AE_MODEL} version {ae} compresses FM {ae_fm}, not FM {fm}")
    decision = gate_challengers(client, settings, _world(settings, chosen, until), challengers, chosen)
    return {
        "promoted": decision.promoted,
        "chain_moved": decision.chain_moved,
        "awaiting_shadow": decision.awaiting_shadow,
        "reason": decision.reason,
        "embedding_version": challengers[0].chain.embedding_version,
        "vms": {d.challenger.vm_name: {"promoted": d.promoted, "reason": d.reason} for d in decision.decisions},
    }


def train_demand(settings: Settings, until: datetime, ttl_hours: int, seed: int) -> dict[str, Any]:
    """The demand model on the request log's hours before ``until`` (the run's logical time, at most the
    log's end), with per-cohort gains from the last day's features as served to every VM with a champion
    (summed: the table serves them all), promoted on its own gate."""
    from solaris.data.eventlog import EventLog
    from solaris.serving.servedlog import served_dir
    from solaris.training.demand import train_demand_job
    from solaris.training.demand_fit import DemandPlan
    from solaris.training.demand_gains import consumers_gains, served_gains

    log = EventLog(settings.world_dir())
    until = min(until, log.end)
    plan = DemandPlan(fit=replace(DemandPlan().fit, seed=seed))
    client = registry.connect(settings)
    per_vm = {}
    for spec in settings.vms():  # what a pair code gained each VM over the last day, per cohort
        champion = registry.version_by_alias(client, spec.registered_name, registry.CHAMPION)
        if champion is not None:
            served_vm = registry.load_vm(spec.name, str(champion.version))
            per_vm[spec.name] = served_gains(
                log, served_dir(settings.served_root, spec.name), served_vm, spec.label, until
            )
    gains = consumers_gains(per_vm)
    decision = train_demand_job(client, settings, log, until, ttl_hours, plan, gains)
    return {
        "demand_version": decision.version,
        "promoted": decision.promoted,
        "reason": decision.reason,
        "auc": decision.auc,
    }
