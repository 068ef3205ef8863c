"""Registered models ``solaris-fm``, ``solaris-ae``, one ``solaris-vm-<name>`` per configured vertical model
(:mod:`solaris.vms`) and ``solaris-demand``: logging, tags, aliases, pinned loading.

Aliases, not stages: ``challenger`` marks what the last training produced, ``champion`` what serves. A VM's
tags name the FM and AE versions it was trained with, so :func:`resolve_champions` derives a whole chain
from ``solaris-vm-<name>@champion`` alone: a reader that resolves while a promotion is moving aliases still
gets three versions that belong together, and checks them. Each VM's aliases move on their own.
"""

from __future__ import annotations

import os
import tempfile
from dataclasses import dataclass, replace
from pathlib import Path

import numpy as np
import pandas as pd
import safetensors
import torch
from mlflow.entities.model_registry import ModelVersion
from mlflow.environment_variables import MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR
from mlflow.exceptions import MlflowException
from mlflow.models import infer_signature

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings, is_tracking_server
from solaris.embedding_version import check_ae_fm, embedding_version, parse_embedding_version
from solaris.models import files
from solaris.tracking import sqlite_file
from solaris.vms import registered_name

FM_MODEL, AE_MODEL = "solaris-fm", "solaris-ae"
DEMAND_MODEL = "solaris-demand"  # the speculation's request model: promoted on its own, not with the chain
CHAMPION, CHALLENGER = "champion", "challenger"
# A VM version's tag while its chain is precomputed beside the champion's (a new embedding version awaiting
# promotion), then what the shadow gate decided.
SHADOW, SHADOW_PENDING, SHADOW_PROMOTED, SHADOW_REFUSED = "shadow", "pending", "promoted", "refused"
# Displaced by a newer chain that passed its NE gate while this one was pending.
SHADOW_SUPERSEDED = "superseded"
# The chain written in shadow: its own alias, not ``challenger``, which every training run moves to what it
# registers, so a newer chain that the gate refuses cannot displace one pending in shadow.
SHADOW_ALIAS = "shadow"
PIP_REQUIREMENTS = [
    f"torch=={torch.__version__.split('+')[0]}",
    f"numpy=={np.__version__}",
    f"pandas=={pd.__version__}",
    f"mlflow=={mlflow.__version__}",
    f"safetensors=={safetensors.__version__}",
]
PYFUNC_CODE = Path(__file__).with_name("pyfunc_model.py")  # a path, not an import: MLflow runs it as code
# Every load downloads a version's few small files; a progress bar per load would flood the task logs.
os.environ.setdefault(MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR.name, "false")


def connect(settings: Settings) -> MlflowClient:
    """Point MLflow (tracking and registry) at the configured store and return a client for it.

    A SQLite store is reopened if its file was deleted or replaced since this process last used it
    (:mod:`solaris.tracking.sqlite_file`): MLflow would otherwise keep writing to the old, unlinked file.
    """
    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    mlflow.set_registry_uri(settings.mlflow_tracking_uri)
    if settings.mlflow_tracking_uri.startswith(sqlite_file.PREFIX):
        sqlite_file.follow(settings.mlflow_tracking_uri)
    return MlflowClient(settings.mlflow_tracking_uri, settings.mlflow_tracking_uri)


def experiment(client: MlflowClient, settings: Settings, name: str) -> str:
    """The experiment's id. Created through a tracking server, its artifacts are the server's to place
    (``mlflow-artifacts:/`` behind ``--serve-artifacts``), so a worker or ranker on another host loads models
    over HTTP; created on a database store (no server), they go under the configured artifact folder."""
    found = client.get_experiment_by_name(name)
    if found is not None:
        return found.experiment_id
    if is_tracking_server(settings.mlflow_tracking_uri):
        return client.create_experiment(name)
    location = settings.mlflow_artifacts_dir / name
    location.mkdir(parents=True, exist_ok=True)
    return client.create_experiment(name, artifact_location=location.as_uri())


def log_model(
    client: MlflowClient,
    model: torch.nn.Module,
    registered_name: str,
    columns: tuple[str, ...],
    example: np.ndarray,
    tags: dict[str, str],
) -> str:
    """Log ``model`` in the active run, register it, tag the version; returns the version number.

    The version holds the model's spec and safetensors weights (:mod:`solaris.models.files`) and the pyfunc
    wrapper as source code: no pickle, so loading it executes nothing stored in the registry.
    """
    frame = pd.DataFrame(example.astype(np.float32), columns=list(columns))
    with torch.inference_mode():
        output = model.eval()(torch.tensor(frame.to_numpy(np.float32))).numpy()
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp) / files.FOLDER
        files.save(model, folder)
        info = mlflow.pyfunc.log_model(
            name="model",
            python_model=PYFUNC_CODE,
            artifacts={files.FOLDER: str(folder)},
            signature=infer_signature(frame, output),
            input_example=frame,
            pip_requirements=PIP_REQUIREMENTS,
            registered_model_name=registered_name,
        )
    version = str(info.registered_model_version)
    for key, value in tags.items():
        client.set_model_version_tag(registered_name, version, key, str(value))
    return version


def log_chain(
    client: MlflowClient,
    fm: torch.nn.Module,
    ae: torch.nn.Module,
    vm: torch.nn.Module,
    fm_example: np.ndarray,
    vm_name: str,
) -> PinnedVersions:
    """Register an FM, an AE of its embeddings and a VM reading the AE's codes as one chain, tagged as
    :func:`pinned_from_vm` checks them (the AE with its FM, the VM with their embedding version); the AE's and
    VM's configs take the versions. Call it in an active MLflow run."""
    fm_version = log_model(client, fm, FM_MODEL, fm.config.columns(), fm_example, {"role": "fm"})
    ae.config = replace(ae.config, fm_version=fm_version)
    ae_example = np.random.default_rng(0).normal(size=(5, ae.config.input_dim))
    ae_tags = {"role": "ae", "fm_version": fm_version}
    ae_version = log_model(client, ae, AE_MODEL, ae.config.columns(), ae_example, ae_tags)
    version = embedding_version(fm_version, ae_version, ae.config.code_dim)
    vm.config = replace(vm.config, embedding_version=version)
    vm_tags = {"role": "vm", "variant": vm.config.variant, "embedding_version": version}
    vm_example = np.zeros((5, len(vm.config.columns())))
    vm_version = log_model(client, vm, registered_name(vm_name), vm.config.columns(), vm_example, vm_tags)
    return PinnedVersions(fm_version, ae_version, vm_version, version, vm_name)


def set_alias(client: MlflowClient, name: str, alias: str, version: str) -> None:
    client.set_registered_model_alias(name, alias, version)


def delete_alias(client: MlflowClient, name: str, alias: str) -> None:
    """Remove ``alias`` from ``name``; nothing to do where it is not set."""
    if version_by_alias(client, name, alias) is not None:
        client.delete_registered_model_alias(name, alias)


def set_chain_alias(client: MlflowClient, chain: PinnedVersions, alias: str) -> None:
    """``alias`` on the chain's FM, AE and VM versions."""
    for name, version in ((FM_MODEL, chain.fm), (AE_MODEL, chain.ae), (chain.vm_model, chain.vm)):
        set_alias(client, name, alias, version)


def version_by_alias(client: MlflowClient, name: str, alias: str) -> ModelVersion | None:
    try:
        return client.get_model_version_by_alias(name, alias)
    except MlflowException:
        return None


@dataclass(frozen=True)
class PinnedVersions:
    """One consistent chain: what a precompute run or a ranker uses from its start to its end."""

    fm: str
    ae: str
    vm: str
    embedding_version: str
    vm_name: str  # the configured VM (:mod:`solaris.vms`): ``vm`` is a version of ``solaris-vm-<vm_name>``

    @property
    def vm_model(self) -> str:
        return registered_name(self.vm_name)


def pinned_from_vm(client: MlflowClient, vm_name: str, vm_version: str) -> PinnedVersions:
    """The chain a VM version was trained with, checked against the AE's own link to its FM."""
    model = registered_name(vm_name)
    vm = client.get_model_version(model, vm_version)
    emb = vm.tags.get("embedding_version")
    if not emb:
        raise ValueError(f"{model} version {vm_version} has no embedding_version tag (variant uses no embeddings?)")
    fm, ae, *_ = parse_embedding_version(emb)
    ae_model = client.get_model_version(AE_MODEL, ae)
    check_ae_fm(ae, ae_model.tags.get("fm_version", "?"), fm)
    return PinnedVersions(fm=fm, ae=ae, vm=str(vm_version), embedding_version=emb, vm_name=vm_name)


def resolve_champions(client: MlflowClient, vm_name: str) -> PinnedVersions:
    model = registered_name(vm_name)
    vm = version_by_alias(client, model, CHAMPION)
    if vm is None:
        raise ValueError(f"{model} has no @{CHAMPION}: run `solaris train all` (or `solaris train vm --vm {vm_name}`)")
    return pinned_from_vm(client, vm_name, vm.version)


def resolve_shadow(client: MlflowClient, vm_name: str) -> PinnedVersions | None:
    """The chain the hourly precompute writes in shadow: ``solaris-vm-<name>@shadow`` while tagged pending."""
    vm = version_by_alias(client, registered_name(vm_name), SHADOW_ALIAS)
    if vm is None or vm.tags.get(SHADOW) != SHADOW_PENDING:
        return None
    return pinned_from_vm(client, vm_name, str(vm.version))


@dataclass(frozen=True)
class DemandChampion:
    """What the budget selector of a precompute run pins, and how well it ranked its validation hours."""

    version: str
    valid_auc: float | None  # the version's ``valid_auc`` tag (None: registered without one)


def resolve_demand(client: MlflowClient) -> DemandChampion:
    """The demand model's champion version and its validation AUC."""
    found = version_by_alias(client, DEMAND_MODEL, CHAMPION)
    if found is None:
        raise ValueError(f"{DEMAND_MODEL} has no @{CHAMPION}: run `solaris train demand` (or use selector verifier)")
    auc = found.tags.get("valid_auc")
    return DemandChampion(str(found.version), float(auc) if auc is not None else None)


def _load(name: str, version: str) -> torch.nn.Module:
    """Download the version's files and build the model from them with this package's classes."""
    with tempfile.TemporaryDirectory() as tmp:
        local = Path(mlflow.artifacts.download_artifacts(artifact_uri=f"models:/{name}/{version}", dst_path=tmp))
        folder = local / "artifacts" / files.FOLDER
        if not (folder / files.SPEC_FILE).is_file():
            raise ValueError(
                f"{name} version {version} has no {files.SPEC_FILE}: it predates safe model files (a pickle, "
                "which SOLARIS no longer loads); train it again"
            )
        return files.load(folder)


def load_fm(version: str) -> torch.nn.Module:
    return _load(FM_MODEL, version)


def load_ae(version: str) -> torch.nn.Module:
    return _load(AE_MODEL, version)


def load_vm(vm_name: str, version: str) -> torch.nn.Module:
    return _load(registered_name(vm_name), version)


def load_demand(version: str) -> torch.nn.Module:
    return _load(DEMAND_MODEL, version)
