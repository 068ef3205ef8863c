"""The promotion gate's decisions over an existing champion, on a registry of tagged versions without model files.

A better VM on the champion's embedding version replaces it at once, touching no other VM; a better chain with
a new embedding version is first written in shadow, then promoted by the shadow gate (FM, AE and every VM's
aliases move together) or refused by it; a worse or equal one is refused, and a chain one VM refuses moves no
VM. The champion's NE on the challenger's hours comes from a stub, so each test takes about a second.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace

import pytest
from mlflow.exceptions import MlflowException
from mlflow_state import own_registry

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.embedding_version import embedding_version
from solaris.tracking import registry
from solaris.tracking.promotion import shadow_gate
from solaris.tracking.registry import AE_MODEL, CHALLENGER, CHAMPION, FM_MODEL, SHADOW, SHADOW_ALIAS, PinnedVersions
from solaris.training.gate import ChainDecision, Challenger, Decision, promotion_gate
from solaris.vms import registered_name

EVAL_HOURS = "2026-03-01T10..2026-03-01T12"
CTR, CVR = "ctr", "cvr"  # the default configuration's VMs, ctr leading
VM_MODEL = registered_name(CTR)


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


def register_chain(client: MlflowClient, dim: int = 8, vm_name: str = CTR) -> PinnedVersions:
    """A new FM version, an AE version of it and a VM trained on their embeddings, tagged as training does."""
    fm = _register(client, FM_MODEL, {"role": "fm"})
    ae = _register(client, AE_MODEL, {"role": "ae", "fm_version": fm})
    on = PinnedVersions(fm=fm, ae=ae, vm="", embedding_version=embedding_version(fm, ae, dim), vm_name=vm_name)
    return register_vm(client, on)


def register_vm(client: MlflowClient, on: PinnedVersions, vm_name: str | None = None) -> PinnedVersions:
    """A new version of VM ``vm_name`` (default: ``on``'s) trained on ``on``'s embedding version."""
    name = vm_name or on.vm_name
    tags = {"role": "vm", "variant": "solaris", "embedding_version": on.embedding_version}
    return replace(on, vm=_register(client, registered_name(name), tags), vm_name=name)


def champions(client: MlflowClient, alias: str = CHAMPION, vm_name: str = CTR) -> tuple[str, str, str]:
    return tuple(  # type: ignore[return-value]
        str(client.get_model_version_by_alias(name, alias).version)
        for name in (FM_MODEL, AE_MODEL, registered_name(vm_name))
    )


def gate_all(
    client: MlflowClient, settings: Settings, challengers: dict[PinnedVersions, float], champion_ne: float
) -> tuple[ChainDecision, list[PinnedVersions]]:
    """The gate on ``challengers`` (chain: its NE), every champion scored at ``champion_ne``; also returns the
    chains the champions were scored as."""
    scored: list[PinnedVersions] = []

    def score_champion(pinned: PinnedVersions) -> float:
        scored.append(pinned)
        return champion_ne

    gated = [Challenger(chain, ne) for chain, ne in challengers.items()]
    return promotion_gate(client, settings, gated, EVAL_HOURS, score_champion), scored


def gate(
    client: MlflowClient, settings: Settings, challenger: PinnedVersions, challenger_ne: float, champion_ne: float
) -> tuple[Decision, list[PinnedVersions]]:
    """:func:`gate_all` for one VM."""
    decision, scored = gate_all(client, settings, {challenger: challenger_ne}, champion_ne)
    return decision.of(challenger.vm_name), scored


@pytest.fixture
def champion(client: MlflowClient, settings: Settings) -> PinnedVersions:
    """A first chain, promoted by the gate on an empty registry, then a second chain's versions registered."""
    first = register_chain(client)
    decision, scored = gate(client, settings, first, 0.9, champion_ne=float("nan"))
    assert decision.promoted and decision.reason == "no champion yet" and scored == []
    assert champions(client) == (first.fm, first.ae, first.vm)
    return first


def gate_runs(client: MlflowClient, vm: str, vm_name: str = CTR) -> list[dict[str, str]]:
    experiment = client.get_experiment_by_name("solaris-promotion").experiment_id
    query = f"params.challenger_vm = '{vm}' and params.vm = '{vm_name}'"
    return [r.data.tags for r in client.search_runs([experiment], query)]


def test_a_better_vm_on_the_champions_embedding_version_replaces_it_at_once(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    challenger = register_vm(client, champion)

    decision, scored = gate(client, settings, challenger, 0.41, champion_ne=0.42)

    assert decision.promoted and not decision.awaiting_shadow
    assert scored == [champion]  # re-scored on the challenger's hours, as the champion chain
    assert (decision.champion, decision.champion_ne, decision.challenger_ne) == (champion, 0.42, 0.41)
    assert registry.resolve_champions(client, CTR) == challenger
    assert "beats" in decision.reason and "does not beat" not in decision.reason
    assert [tags["promoted"] for tags in gate_runs(client, challenger.vm)] == ["true"]
    assert client.get_model_version(VM_MODEL, challenger.vm).tags["promotion"] == decision.reason
    assert registry.resolve_shadow(client, CTR) is None


def test_a_better_chain_on_a_new_embedding_version_is_first_written_in_shadow(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    _register(client, FM_MODEL, {"role": "fm"})  # an FM never used: the chain's three versions all differ
    challenger = register_chain(client)
    assert (challenger.fm, challenger.ae, challenger.vm) == ("3", "2", "2")

    decision, scored = gate(client, settings, challenger, 0.41, champion_ne=0.42)

    assert not decision.promoted and decision.awaiting_shadow and scored == [champion]
    assert "beats" in decision.reason and "precomputed in shadow first" in decision.reason
    assert champions(client) == (champion.fm, champion.ae, champion.vm)  # the store has nothing of it yet
    assert champions(client, SHADOW_ALIAS) == (challenger.fm, challenger.ae, challenger.vm)
    assert registry.resolve_shadow(client, CTR) == challenger  # what the hourly precompute now also writes
    assert [tags["promoted"] for tags in gate_runs(client, challenger.vm)] == ["false"]


@pytest.mark.parametrize(
    ("champion_coverage", "shadow_coverage", "promoted"),
    # 0.90 - 0.80 is 0.0999... in floating point; 0.20 - 0.10 is exactly the margin, so only it tells <= from <
    [(0.90, 0.80, True), (0.20, 0.10, True), (0.90, 0.79, False)],
    ids=["10-points-below", "exactly-the-margin-below", "11-points-below"],
)
def test_the_shadow_gate_promotes_a_shadow_within_ten_coverage_points_and_refuses_one_below(
    client: MlflowClient,
    settings: Settings,
    champion: PinnedVersions,
    champion_coverage: float,
    shadow_coverage: float,
    promoted: bool,
) -> None:
    challenger = register_chain(client)
    assert gate(client, settings, challenger, 0.41, champion_ne=0.42)[0].awaiting_shadow

    decision = shadow_gate(client, settings, champion, challenger, champion_coverage, shadow_coverage, hours=4)

    assert decision.promoted is promoted
    expected = challenger if promoted else champion
    assert champions(client) == (expected.fm, expected.ae, expected.vm)  # FM, AE and VM move together
    verdict = "within" if promoted else "more than"
    assert decision.reason == (
        f"shadow coverage {shadow_coverage:.3f} after 4 h is {verdict} 10 points below champion VM {champion.vm}'s "
        f"{champion_coverage:.3f}"
    )
    tags = client.get_model_version(VM_MODEL, challenger.vm).tags
    assert (tags[SHADOW], tags["promotion"]) == ("promoted" if promoted else "refused", decision.reason)
    decisions = {t["reason"]: t["promoted"] for t in gate_runs(client, challenger.vm)}  # the NE gate's, then this
    assert len(decisions) == 2 and decisions[decision.reason] == str(promoted).lower()
    assert registry.resolve_shadow(client, CTR) is None  # written in shadow no more, either way


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
    assert registry.resolve_champions(client, CTR) == champion
    assert [tags["promoted"] for tags in gate_runs(client, challenger.vm)] == ["false"]
    assert registry.resolve_shadow(client, CTR) is None


def test_a_better_challenger_after_a_refused_one_is_still_promoted(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    """A refusal leaves nothing behind that stops the next better chain (the gate reads the VM alias only)."""
    refused = register_chain(client)
    assert not gate(client, settings, refused, 0.42, champion_ne=0.42)[0].promoted
    better = register_chain(client)

    decision, scored = gate(client, settings, better, 0.30, champion_ne=0.42)

    assert decision.awaiting_shadow and scored == [champion]
    assert shadow_gate(client, settings, champion, better, 0.9, 0.9, hours=4).promoted
    assert champions(client) == (better.fm, better.ae, better.vm)


def test_a_newer_chain_the_gate_refuses_leaves_the_pending_shadow_and_one_that_passes_supersedes_it(
    client: MlflowClient, settings: Settings, champion: PinnedVersions
) -> None:
    """Training moves ``challenger`` to whatever it registers; the shadow keeps its own alias, so a refused chain
    trained while another waits in shadow does not stop that one's promotion."""
    pending = register_chain(client)
    assert gate(client, settings, pending, 0.41, champion_ne=0.42)[0].awaiting_shadow
    worse = register_chain(client)
    registry.set_chain_alias(client, worse, CHALLENGER)  # as training registers it

    assert not gate(client, settings, worse, 0.43, champion_ne=0.42)[0].promoted
    assert registry.resolve_shadow(client, CTR) == pending

    newer = register_chain(client)
    assert gate(client, settings, newer, 0.40, champion_ne=0.42)[0].awaiting_shadow
    assert registry.resolve_shadow(client, CTR) == newer
    assert client.get_model_version(VM_MODEL, pending.vm).tags[SHADOW] == "superseded"
    assert shadow_gate(client, settings, champion, newer, 0.9, 0.9, hours=4).promoted
    assert champions(client) == (newer.fm, newer.ae, newer.vm)
    assert registry.resolve_shadow(client, CTR) is None
    assert registry.version_by_alias(client, FM_MODEL, SHADOW_ALIAS) is None  # the alias left with the decision


def register_both(client: MlflowClient) -> tuple[PinnedVersions, PinnedVersions]:
    """A new FM and AE, and a ctr and a cvr version trained on them."""
    ctr = register_chain(client)
    return ctr, register_vm(client, ctr, CVR)


@pytest.fixture
def two_champions(client: MlflowClient, settings: Settings) -> tuple[PinnedVersions, PinnedVersions]:
    """A first chain with both configured VMs, ctr and cvr, promoted together on an empty registry."""
    ctr, cvr = register_both(client)
    decision, _ = gate_all(client, settings, {ctr: 0.9, cvr: 0.9}, champion_ne=float("nan"))
    assert decision.promoted and decision.chain_moved
    return ctr, cvr


def test_a_vm_retrained_alone_moves_its_own_champion_and_no_other(
    client: MlflowClient, settings: Settings, two_champions: tuple[PinnedVersions, PinnedVersions]
) -> None:
    ctr, cvr = two_champions
    challenger = register_vm(client, cvr)

    decision, scored = gate_all(client, settings, {challenger: 0.41}, champion_ne=0.42)

    assert decision.promoted and not decision.chain_moved and scored == [cvr]
    assert registry.resolve_champions(client, CVR) == challenger
    assert registry.resolve_champions(client, CTR) == ctr  # the other VM's alias never moved
    assert champions(client) == (ctr.fm, ctr.ae, ctr.vm)


def test_a_new_chain_one_vm_refuses_moves_no_vm(
    client: MlflowClient, settings: Settings, two_champions: tuple[PinnedVersions, PinnedVersions]
) -> None:
    """One table serves both: a new embedding version that is worse for cvr is adopted for neither."""
    old_ctr, old_cvr = two_champions
    ctr, cvr = register_both(client)
    ne = {CTR: 0.42, CVR: 0.20}

    scored: list[PinnedVersions] = []
    challengers = [Challenger(ctr, 0.41), Challenger(cvr, 0.21)]  # ctr better, cvr worse than its champion
    decision = promotion_gate(client, settings, challengers, EVAL_HOURS, lambda c: scored.append(c) or ne[c.vm_name])

    assert not decision.promoted and not decision.awaiting_shadow and scored == [old_ctr, old_cvr]
    assert "beats" in decision.of(CTR).reason and "cvr did not" in decision.of(CTR).reason
    assert "does not beat" in decision.of(CVR).reason
    assert registry.resolve_champions(client, CTR) == old_ctr and registry.resolve_champions(client, CVR) == old_cvr
    assert registry.resolve_shadow(client, CTR) is None and registry.resolve_shadow(client, CVR) is None


def test_a_new_chain_every_vm_passes_waits_in_shadow_and_the_shadow_gate_moves_them_all(
    client: MlflowClient, settings: Settings, two_champions: tuple[PinnedVersions, PinnedVersions]
) -> None:
    old_ctr, old_cvr = two_champions
    ctr, cvr = register_both(client)

    decision, _ = gate_all(client, settings, {ctr: 0.41, cvr: 0.19}, champion_ne=0.42)

    assert decision.awaiting_shadow and not decision.promoted
    assert registry.resolve_shadow(client, CTR) == ctr and registry.resolve_shadow(client, CVR) == cvr
    assert registry.resolve_champions(client, CVR) == old_cvr

    assert shadow_gate(client, settings, old_ctr, ctr, 0.9, 0.9, hours=4).promoted  # the lead's shadow decides

    assert registry.resolve_champions(client, CTR) == ctr and registry.resolve_champions(client, CVR) == cvr
    assert champions(client, vm_name=CVR) == (ctr.fm, ctr.ae, cvr.vm)
    assert sorted(t["promoted"] for t in gate_runs(client, cvr.vm, CVR)) == [
        "false",
        "true",
    ]  # its NE gate, its shadow gate
