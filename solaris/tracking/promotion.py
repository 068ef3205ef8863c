"""Moving the ``champion`` alias, and the shadow chain's life: written in shadow (``await_shadow``), then
promoted or refused on its coverage (``shadow_gate``). Every decision is a run of ``solaris-promotion``.

The NE gate of a training run (:mod:`solaris.training.gate`) and the hourly precompute's shadow gate
(:mod:`solaris.precompute.shadow`) both decide through here, so neither layer imports the other.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.tracking import registry
from solaris.tracking.registry import (
    AE_MODEL,
    CHAMPION,
    FM_MODEL,
    SHADOW,
    SHADOW_ALIAS,
    SHADOW_PENDING,
    SHADOW_PROMOTED,
    SHADOW_REFUSED,
    SHADOW_SUPERSEDED,
    PinnedVersions,
)

MAX_SHADOW_COVERAGE_DROP = 0.10  # all-tier coverage the shadow may lack against the champion's, at most


@dataclass(frozen=True)
class ShadowDecision:
    promoted: bool
    shadow: PinnedVersions  # the lead VM's; every VM pending on its embedding version moves with it
    champion: PinnedVersions
    shadow_coverage: float
    champion_coverage: float
    hours: int  # hours the shadow had been written, this one included
    reason: str


def await_shadow(client: MlflowClient, chains: Sequence[PinnedVersions]) -> None:
    """Make the chains (one FM and AE, a VM each) what the hourly precompute writes in shadow: ``shadow``,
    each VM version tagged pending; a chain still pending (older, it passed too) is tagged superseded."""
    for chain in chains:
        earlier = registry.resolve_shadow(client, chain.vm_name)
        if earlier is not None and earlier.vm != chain.vm:
            client.set_model_version_tag(earlier.vm_model, earlier.vm, SHADOW, SHADOW_SUPERSEDED)
    registry.set_alias(client, FM_MODEL, SHADOW_ALIAS, chains[0].fm)
    registry.set_alias(client, AE_MODEL, SHADOW_ALIAS, chains[0].ae)
    for chain in chains:
        registry.set_alias(client, chain.vm_model, SHADOW_ALIAS, chain.vm)
        client.set_model_version_tag(chain.vm_model, chain.vm, SHADOW, SHADOW_PENDING)


def pending_shadows(client: MlflowClient, vm_names: Sequence[str], embedding_version: str) -> list[PinnedVersions]:
    """Every VM's chain waiting in shadow on ``embedding_version``."""
    found = (registry.resolve_shadow(client, name) for name in vm_names)
    return [chain for chain in found if chain is not None and chain.embedding_version == embedding_version]


def shadow_gate(
    client: MlflowClient,
    settings: Settings,
    champion: PinnedVersions,
    shadow: PinnedVersions,
    champion_coverage: float,
    shadow_coverage: float,
    hours: int,
) -> ShadowDecision:
    """Promote the shadow chain unless its all-tier coverage of the hour past lies more than
    :data:`MAX_SHADOW_COVERAGE_DROP` below the champion's; refused, it is no longer written in shadow."""
    promoted = champion_coverage - shadow_coverage <= MAX_SHADOW_COVERAGE_DROP
    verdict = "within" if promoted else "more than"
    reason = (
        f"shadow coverage {shadow_coverage:.3f} after {hours} h is {verdict} {MAX_SHADOW_COVERAGE_DROP * 100:g} "
        f"points below champion VM {champion.vm}'s {champion_coverage:.3f}"
    )
    decision = ShadowDecision(promoted, shadow, champion, shadow_coverage, champion_coverage, hours, reason)
    params = {"champion_vm": champion.vm, "shadow_hours": hours}
    found = {"shadow_coverage": shadow_coverage, "champion_coverage": champion_coverage}
    chains = pending_shadows(client, [s.name for s in settings.vms()], shadow.embedding_version) or [shadow]
    for chain in chains:
        log_decision(
            client, settings, f"shadow-gate-{chain.vm_name}-v{chain.vm}", chain, params, found, promoted, reason
        )
        client.set_model_version_tag(chain.vm_model, chain.vm, SHADOW, SHADOW_PROMOTED if promoted else SHADOW_REFUSED)
    end_shadow(client, [chain.vm_model for chain in chains])
    if promoted:
        promote(client, chains)
    return decision


def end_shadow(client: MlflowClient, vm_models: Sequence[str]) -> None:
    """Nothing is written in shadow any more: the ``shadow`` alias leaves the FM, the AE and these VMs."""
    for name in (FM_MODEL, AE_MODEL, *vm_models):
        registry.delete_alias(client, name, SHADOW_ALIAS)


def promote(client: MlflowClient, chains: Sequence[PinnedVersions]) -> None:
    """Move ``champion`` to the chains (VMs of one FM and AE). The VM aliases move last: readers derive a chain
    from a VM's tags, never from FM/AE aliases alone."""
    if not chains:
        return
    registry.set_alias(client, FM_MODEL, CHAMPION, chains[0].fm)
    registry.set_alias(client, AE_MODEL, CHAMPION, chains[0].ae)
    for chain in chains:
        registry.set_alias(client, chain.vm_model, CHAMPION, chain.vm)


def log_decision(
    client: MlflowClient,
    settings: Settings,
    run_name: str,
    challenger: PinnedVersions,
    params: dict[str, object],
    found: dict[str, float],
    promoted: bool,
    reason: str,
) -> None:
    """One decision as a run of ``solaris-promotion``; its reason also on the challenger VM's ``promotion`` tag."""
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-promotion"))
    with mlflow.start_run(run_name=run_name):
        mlflow.log_params(
            {
                "vm": challenger.vm_name,
                "challenger_vm": challenger.vm,
                "challenger_embedding_version": challenger.embedding_version,
                **params,
            }
        )
        mlflow.log_metrics(found)
        mlflow.set_tags({"promoted": str(promoted).lower(), "reason": reason})
    client.set_model_version_tag(challenger.vm_model, challenger.vm, "promotion", reason)
