"""The promotion gate's decisions over an existing champion, on a registry of tagged versions without model files.

A better challenger replaces the champion (FM, AE and VM aliases move together); a worse one or an equal one
does not. The champion's NE on the challenger's hours comes from a stub, so each test takes about a second.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from mlflow import MlflowClient
from mlflow.exceptions import MlflowException
from mlflow_state import own_registry

from solaris.config import Settings
from solaris.embedding_version import embedding_version
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHAMPION, FM_MODEL, VM_MODEL, PinnedVersions
from solaris.training.gate import Decision, promotion_gate

EVAL_HOURS = "2026-03-01T10..2026-03-01T12"


@pytest.fixture
def client(settings: Settings) -> Iterator[MlflowClient]:
    """A client on this test's own MLflow store (see mlflow_state)."""
    with own_registry(settings) as own:
        yield own


def _register(client: MlflowClient, name: str, tags: dict[str, str]) -> str:
    try:
        client.create_registered_model(name)
    except MlflowException:
        pass  # registered by an earlier chain
    return str(client.create_model_version(name, source="file:///nowhere", tags=tags).version)


def register_chain(client: MlflowClient, dim: int = 8) -> PinnedVersions:
    """A new FM version, an AE version of it and a VM trained on their embeddings, tagged as training does."""
    fm = _register(client, FM_MODEL, {"role": "fm"})
    ae = _register(client, AE_MODEL, {"role": "ae", "fm_version": fm})
    emb = embedding_version(fm, ae, dim)
    vm = _register(client, VM_MODEL, {"role": "vm", "variant": "solaris", "embedding_version": emb})
    return PinnedVersions(fm=fm, ae=ae, vm=vm, embedding_version=emb)


def champions(client: MlflowClient) -> tuple[str, str, str]:
    return tuple(  # type: ignore[return-value]
        str(client.get_model_version_by_alias(name, CHAMPION).version) for name in (FM_MODEL, AE_MODEL, VM_MODEL)
    )


def gate(
    client: MlflowClient, settings: Settings, challenger: PinnedVersions, challenger_ne: float, champion_ne: float
) -> tuple[Decision, list[PinnedVersions]]:
    """The gate with the champion scored at ``champion_ne``; also returns the chains the champion was scored as."""
    scored: list[PinnedVersions] = []

    def score_champion(pinned: PinnedVersions) -> float:
        scored.append(pinned)
        return champion_ne

    return promotion_gate(client, settings, challenger, challenger_ne, EVAL_HOURS, score_champion), scored


@pytest.fixture
def champion(client: MlflowClient, settings: Settings) -> PinnedVersions:
    """A first chain, promoted by the gate on an empty registry, then a second chain's versions registered."""
    first = register_chain(client)
    decision, scored = gate(client, settings, first, 0.9, champion_ne=float("nan"))
    assert decision.promoted and decision.reason == "no champion yet" and scored == []
    assert champions(client) == (first.fm, first.ae, first.vm)
    return first


def gate_runs(client: MlflowClient, vm: str) -> list[dict[str, str]]:
    experiment = client.get_experiment_by_name("solaris-promotion").experiment_id
    return [r.data.tags for r in client.search_runs([experiment], f"params.challenger_vm = '{vm}'")]


def test_a_better_challenger_replaces_the_champion_fm_ae_and_vm_together(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    _register(client, FM_MODEL, {"role": "fm"})  # an FM never used: the chain's three versions all differ
    challenger = register_chain(client)
    assert (challenger.fm, challenger.ae, challenger.vm) == ("3", "2", "2")

    decision, scored = gate(client, settings, challenger, 0.41, champion_ne=0.42)

    assert decision.promoted
    assert scored == [champion]  # re-scored on the challenger's hours, as the champion chain
    assert (decision.champion, decision.champion_ne, decision.challenger_ne) == (champion, 0.42, 0.41)
    assert champions(client) == (challenger.fm, challenger.ae, challenger.vm)
    assert registry.resolve_champions(client) == challenger
    assert "beats" in decision.reason and "does not beat" not in decision.reason
    assert [tags["promoted"] for tags in gate_runs(client, challenger.vm)] == ["true"]
    assert client.get_model_version(VM_MODEL, challenger.vm).tags["promotion"] == decision.reason


@pytest.mark.parametrize("challenger_ne", [0.43, 0.42], ids=["worse", "tie"])
def test_a_worse_or_tying_challenger_leaves_every_champion_alias(
    client: MlflowClient, settings: Settings, champion: PinnedVersions, challenger_ne: float
) -> None:
    challenger = register_chain(client)

    decision, scored = gate(client, settings, challenger, challenger_ne, champion_ne=0.42)

    assert not decision.promoted and scored == [champion]
    assert (decision.challenger_ne, decision.champion_ne) == (challenger_ne, 0.42)
    assert "does not beat" in decision.reason
    assert champions(client) == (champion.fm, champion.ae, champion.vm)
    assert registry.resolve_champions(client) == champion
    assert [tags["promoted"] for tags in gate_runs(client, challenger.vm)] == ["false"]


def test_a_better_challenger_after_a_refused_one_is_still_promoted(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    """A refusal leaves nothing behind that stops the next better chain (the gate reads the VM alias only)."""
    refused = register_chain(client)
    assert not gate(client, settings, refused, 0.42, champion_ne=0.42)[0].promoted
    better = register_chain(client)

    decision, scored = gate(client, settings, better, 0.30, champion_ne=0.42)

    assert decision.promoted and scored == [champion]
    assert champions(client) == (better.fm, better.ae, better.vm)
