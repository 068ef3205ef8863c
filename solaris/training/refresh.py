"""The FM's refresh on production's cadence: the FM fine-tuned on every hour before the refresh hour, the AE on
its new embeddings, both registered as a new embedding version, and the VM that reads it until the VMs are
refreshed on what it serves.

A first training splits its hours so the first-stage VMs learn from FM outputs on hours the FM never saw. A
refresh has no such need (the VMs that will read the new version are refreshed on the features it serves), so
the FM trains on all the hours it may see, its last hours kept for early stopping.
"""

from __future__ import annotations

import copy
from dataclasses import replace
from datetime import datetime

import numpy as np

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.hourly import HOUR
from solaris.embedding_version import embedding_version
from solaris.models.autoencoder import Autoencoder
from solaris.models.features import fm_matrix
from solaris.models.fm import FoundationModel
from solaris.models.splits import Span
from solaris.models.training import embed_span, train_ae, train_fm
from solaris.models.vm import VerticalModel
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, FM_MODEL, PinnedVersions
from solaris.training import runs
from solaris.training.jobs import TRAINED_UNTIL, Trained, TrainPlan, World
from solaris.vms import registered_name


def refresh_spans(world: World, until: datetime, valid_hours: int) -> tuple[Span, Span]:
    """(train, valid): every hour of the log before ``until``, the last ``valid_hours`` for early stopping."""
    valid = Span(until - valid_hours * HOUR, until)
    train = Span(world.log.start, valid.start)
    if train.hours < 1 or valid_hours < 1:
        raise ValueError(
            f"an FM refresh at {until.isoformat()} needs training hours before {valid_hours} validation hours"
        )
    return train, valid


def refresh_fm(
    client: MlflowClient,
    settings: Settings,
    world: World,
    previous: Trained,
    until: datetime,
    plan: TrainPlan,
    valid_hours: int,
) -> Trained:
    """``previous`` fine-tuned on the hours before ``until``; a new ``solaris-fm`` version tagged with them."""
    if not isinstance(previous.model, FoundationModel):
        raise ValueError(f"{FM_MODEL} version {previous.version} is not a foundation model")
    train, valid = refresh_spans(world, until, valid_hours)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-fm"))
    with mlflow.start_run(run_name="fm-refresh"):
        runs.log_params(
            {**plan.fm_fit.as_params(), "refreshed_from": previous.version, "train": str(train), "valid": str(valid)}
        )
        fm, fit = train_fm(
            world.log,
            train,
            valid,
            world.index,
            world.users,
            world.items,
            fit_config=plan.fm_fit,
            on_epoch=runs.log_epoch,
            start_from=previous.model,
        )
        runs.log_fit(fit, "FM refresh")
        example = fm_matrix(world.log.impressions(valid.start, valid.end).slice(0, 5), world.index, fm.config.history)
        tags = {"role": "fm", "embedding_dim": fm.config.embedding_dim, "refreshed_from": previous.version}
        tags[TRAINED_UNTIL] = until.isoformat()
        version = registry.log_model(client, fm, FM_MODEL, fm.config.columns(), example, tags)
    return Trained(fm, version, {"best_valid_loss": fit.best_valid_loss})


def refresh_ae(
    client: MlflowClient,
    settings: Settings,
    world: World,
    fm: Trained,
    previous: Trained,
    until: datetime,
    plan: TrainPlan,
    valid_hours: int,
) -> Trained:
    """``previous`` fine-tuned on the new FM's embeddings, so the codes stay close to those the VMs know."""
    if not isinstance(previous.model, Autoencoder) or not isinstance(fm.model, FoundationModel):
        raise ValueError(f"{AE_MODEL} version {previous.version} or {FM_MODEL} {fm.version} is not a SOLARIS model")
    train, valid = refresh_spans(world, until, valid_hours)
    config = replace(previous.model.config, fm_version=fm.version)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-ae"))
    with mlflow.start_run(run_name="ae-refresh"):
        runs.log_params({**config.as_params(), **plan.fit.as_params(), "refreshed_from": previous.version})
        seed = plan.fit.seed
        embedded = [
            embed_span(world.log, s, world.index, fm.model, plan.ae_rows, seed, plan.device) for s in (train, valid)
        ]
        ae, fit = train_ae(*embedded, config, plan.fit, runs.log_epoch, start_from=previous.model)
        runs.log_fit(fit, "AE refresh")
        tags = {"role": "ae", "fm_version": fm.version, "code_dim": config.code_dim, "refreshed_from": previous.version}
        version = registry.log_model(client, ae, AE_MODEL, config.columns(), embedded[1][:5], tags)
    return Trained(ae, version, {"reconstruction_error": fit.best_valid_loss})


def register_successor_vm(
    client: MlflowClient, settings: Settings, vm_name: str, vm_version: str, fm: Trained, ae: Trained
) -> PinnedVersions:
    """The VM that reads the new version until the VMs are refreshed on what it serves: ``vm_version``'s
    weights, tagged with the new embedding version. What it decides meanwhile needs no embedding (the
    precompute's verifier scores with every tier absent); its scores on the new codes are never evaluated."""
    model = registered_name(vm_name)
    previous = registry.load_vm(vm_name, vm_version)
    if not isinstance(previous, VerticalModel) or not isinstance(ae.model, Autoencoder):
        raise ValueError(f"{model} version {vm_version} is not a vertical model")
    version = embedding_version(fm.version, ae.version, ae.model.config.code_dim)
    vm = copy.deepcopy(previous)
    vm.config = replace(previous.config, embedding_version=version)
    example = np.zeros((5, len(vm.config.columns())), np.float32)  # id 0, hour 0, no tiers: a valid input
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-vm"))
    with mlflow.start_run(run_name=f"{vm_name}-successor"):
        tags = {
            "role": "vm",
            "vm": vm_name,
            "variant": vm.config.variant,
            "embedding_version": version,
            "code_dim": vm.config.code_dim,
            "weights_of": vm_version,
        }
        successor = registry.log_model(client, vm, model, vm.config.columns(), example, tags)
    return PinnedVersions(fm.version, ae.version, successor, version, vm_name)
