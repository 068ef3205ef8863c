"""The promotion gate: a challenger VM becomes champion only if its NE beats its own champion's on the same
evaluation hours. Each champion is re-scored on the challenger's hours (never compared by a stale number from
other hours), and every VM's decision is logged as a run of the ``solaris-promotion`` experiment.

VMs that read the champion's embedding version (one VM retrained alone) are promoted each on its own. A new
embedding version (a new FM and AE) is one table every VM reads, so its chain is adopted only when every VM
passes; and since it would start with an empty store (tier none until its pairs and aggregates refill), passing
it only becomes the shadow chain: the hourly precompute writes its tiers beside the champion's, and the shadow
gate (:mod:`solaris.tracking.promotion`) promotes every VM of it at once, or refuses them.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.tracking import registry
from solaris.tracking.promotion import await_shadow, log_decision, promote
from solaris.tracking.registry import AE_MODEL, CHAMPION, FM_MODEL, PinnedVersions


@dataclass(frozen=True)
class Challenger:
    chain: PinnedVersions
    ne: float  # on the evaluation hours the gate names


@dataclass(frozen=True)
class Decision:
    """One VM's verdict."""

    promoted: bool
    challenger: PinnedVersions
    challenger_ne: float
    champion: PinnedVersions | None
    champion_ne: float | None
    eval_hours: str
    reason: str
    awaiting_shadow: bool = False  # passed on NE; promoted (or not) by the shadow gate


@dataclass(frozen=True)
class ChainDecision:
    """Every gated VM's verdict, in configuration order."""

    decisions: tuple[Decision, ...]
    chain_moved: bool  # whether the FM and AE champions moved with them (their first, or a new embedding version)

    @property
    def promoted(self) -> bool:
        """Whether any VM's champion moved."""
        return any(d.promoted for d in self.decisions)

    @property
    def awaiting_shadow(self) -> bool:
        return any(d.awaiting_shadow for d in self.decisions)

    @property
    def reason(self) -> str:
        return "; ".join(f"{d.challenger.vm_name}: {d.reason}" for d in self.decisions)

    def of(self, vm_name: str) -> Decision:
        return next(d for d in self.decisions if d.challenger.vm_name == vm_name)


def _verdict(
    client: MlflowClient,
    challenger: Challenger,
    eval_hours: str,
    champion_ne_on_same_hours: Callable[[PinnedVersions], float],
) -> Decision:
    c = challenger.chain
    champion = None
    if registry.version_by_alias(client, c.vm_model, CHAMPION) is not None:
        champion = registry.resolve_champions(client, c.vm_name)
    champion_ne = None
    if champion is None:
        promoted, reason = True, "no champion yet"
    elif champion.vm == c.vm:
        promoted, reason = False, f"VM version {c.vm} is already champion"
    else:
        champion_ne = champion_ne_on_same_hours(champion)
        promoted = challenger.ne < champion_ne
        verdict = "beats" if promoted else "does not beat"
        reason = f"challenger NE {challenger.ne:.6f} {verdict} champion VM {champion.vm} NE {champion_ne:.6f}"
    return Decision(promoted, c, challenger.ne, champion, champion_ne, eval_hours, reason)


def _new_version(decision: Decision) -> bool:
    return (
        decision.champion is not None and decision.champion.embedding_version != decision.challenger.embedding_version
    )


def promotion_gate(
    client: MlflowClient,
    settings: Settings,
    challengers: Sequence[Challenger],
    eval_hours: str,
    champion_ne_on_same_hours: Callable[[PinnedVersions], float],
) -> ChainDecision:
    verdicts = [_verdict(client, c, eval_hours, champion_ne_on_same_hours) for c in challengers]
    if any(map(_new_version, verdicts)):
        verdicts = _as_one_chain(verdicts)
    promoted = [d.challenger for d in verdicts if d.promoted]
    decision = ChainDecision(tuple(verdicts), any(_moves_teacher(client, c) for c in promoted))
    for d in verdicts:
        params = {"champion_vm": d.champion.vm if d.champion else "none", "eval_hours": eval_hours}
        found = {"challenger_ne": d.challenger_ne} | ({} if d.champion_ne is None else {"champion_ne": d.champion_ne})
        log_decision(
            client,
            settings,
            f"gate-{d.challenger.vm_name}-v{d.challenger.vm}",
            d.challenger,
            params,
            found,
            d.promoted,
            d.reason,
        )
    if decision.awaiting_shadow:
        await_shadow(client, [d.challenger for d in verdicts])
    promote(client, promoted)
    return decision


def _moves_teacher(client: MlflowClient, chain: PinnedVersions) -> bool:
    champions = [registry.version_by_alias(client, name, CHAMPION) for name in (FM_MODEL, AE_MODEL)]
    return [None if c is None else str(c.version) for c in champions] != [chain.fm, chain.ae]


def _as_one_chain(verdicts: list[Decision]) -> list[Decision]:
    """A new embedding version: every VM passed, and all wait for the shadow gate; or none moves."""
    failed = [d.challenger.vm_name for d in verdicts if not d.promoted]
    version = verdicts[0].challenger.embedding_version
    if failed:
        why = f"embedding version {version} is adopted only when every VM passes; {', '.join(failed)} did not"
        return [replace(d, promoted=False, reason=f"{d.reason}; {why}") if d.promoted else d for d in verdicts]
    why = f"embedding version {version} is new: precomputed in shadow first"
    return [replace(d, promoted=False, reason=f"{d.reason}; {why}", awaiting_shadow=True) for d in verdicts]
