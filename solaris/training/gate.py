"""The promotion gate: a challenger chain becomes champion only if its NE beats the champion's on the same
evaluation hours. The champion is re-scored on the challenger's hours (never compared by a stale number from
other hours), and every decision is logged as a run of the ``solaris-promotion`` experiment.

A challenger with a new embedding version would start with an empty store (tier none until its pairs and
aggregates refill), so passing on NE it only becomes the shadow chain: the hourly precompute writes its tiers
beside the champion's, and the shadow gate (:mod:`solaris.tracking.promotion`) promotes it once they cover
nearly as much as the champion's, or refuses it.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from mlflow import MlflowClient

from solaris.config import Settings
from solaris.tracking import registry
from solaris.tracking.promotion import await_shadow, log_decision, promote
from solaris.tracking.registry import CHAMPION, VM_MODEL, PinnedVersions


@dataclass(frozen=True)
class Decision:
    promoted: bool
    challenger: PinnedVersions
    challenger_ne: float
    champion: PinnedVersions | None
    champion_ne: float | None
    eval_hours: str
    reason: str
    awaiting_shadow: bool = False  # passed on NE; promoted (or not) by the shadow gate


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
    awaiting = promoted and champion is not None and champion.embedding_version != challenger.embedding_version
    if awaiting:
        promoted, reason = False, f"{reason}; embedding version {challenger.embedding_version} is new: precomputed in shadow first"
    decision = Decision(promoted, challenger, challenger_ne, champion, champion_ne, eval_hours, reason, awaiting)
    params = {"champion_vm": champion.vm if champion else "none", "eval_hours": eval_hours}
    found = {"challenger_ne": challenger_ne} | ({} if champion_ne is None else {"champion_ne": champion_ne})
    log_decision(client, settings, f"gate-vm{challenger.vm}", challenger, params, found, promoted, reason)
    if awaiting:
        await_shadow(client, challenger)
    if promoted:
        promote(client, challenger)
    return decision


