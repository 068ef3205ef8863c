"""The promotion gate: a challenger chain becomes champion only if its NE beats the champion's on the same
evaluation hours. The champion is re-scored on the challenger's hours (never compared by a stale number from
other hours), and every decision is logged as a run of the ``solaris-promotion`` experiment.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import mlflow
from mlflow import MlflowClient

from solaris.config import Settings
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHAMPION, FM_MODEL, VM_MODEL, PinnedVersions


@dataclass(frozen=True)
class Decision:
    promoted: bool
    challenger: PinnedVersions
    challenger_ne: float
    champion: PinnedVersions | None
    champion_ne: float | None
    eval_hours: str
    reason: str


def promotion_gate(
    client: MlflowClient,
    settings: Settings,
    challenger: PinnedVersions,
    challenger_ne: float,
    eval_hours: str,
    champion_ne_on_same_hours: Callable[[PinnedVersions], float],
) -> Decision:
    champion = None
    if registry.version_by_alias(client, VM_MODEL, CHAMPION) is not None:
        champion = registry.resolve_champions(client)
    champion_ne = None
    if champion is None:
        promoted, reason = True, "no champion yet"
    elif champion.vm == challenger.vm:
        promoted, reason = False, f"VM version {challenger.vm} is already champion"
    else:
        champion_ne = champion_ne_on_same_hours(champion)
        promoted = challenger_ne < champion_ne
        verdict = "beats" if promoted else "does not beat"
        reason = f"challenger NE {challenger_ne:.6f} {verdict} champion VM {champion.vm} NE {champion_ne:.6f}"
    decision = Decision(promoted, challenger, challenger_ne, champion, champion_ne, eval_hours, reason)
    _log(client, settings, decision)
    if promoted:
        promote(client, challenger)
    return decision


def promote(client: MlflowClient, chain: PinnedVersions) -> None:
    """Move ``champion`` to the chain. The VM alias moves last: readers derive the chain from the VM's tags,
    never from FM/AE aliases alone."""
    registry.set_alias(client, FM_MODEL, CHAMPION, chain.fm)
    registry.set_alias(client, AE_MODEL, CHAMPION, chain.ae)
    registry.set_alias(client, VM_MODEL, CHAMPION, chain.vm)


def _log(client: MlflowClient, settings: Settings, decision: Decision) -> None:
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-promotion"))
    with mlflow.start_run(run_name=f"gate-vm{decision.challenger.vm}"):
        mlflow.log_params(
            {
                "challenger_vm": decision.challenger.vm,
                "challenger_embedding_version": decision.challenger.embedding_version,
                "champion_vm": decision.champion.vm if decision.champion else "none",
                "eval_hours": decision.eval_hours,
            }
        )
        mlflow.log_metric("challenger_ne", decision.challenger_ne)
        if decision.champion_ne is not None:
            mlflow.log_metric("champion_ne", decision.champion_ne)
        mlflow.set_tags({"promoted": str(decision.promoted).lower(), "reason": decision.reason})
    client.set_model_version_tag(VM_MODEL, decision.challenger.vm, "promotion", decision.reason)
