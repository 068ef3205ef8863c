"""The ranker follows solaris-vm@champion: a moved alias loads in the background and swaps atomically; a
request never pairs one VM with another version's embeddings; a bad champion never replaces a good one."""

from __future__ import annotations

import threading
from collections.abc import Iterator

import numpy as np
import pytest
import torch
from conftest import T, Layout

from solaris.config import Settings
from solaris.serving import Ranker
from solaris.serving.champion import ChampionWatcher, ServingModel, load_serving_model
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World
from solaris.tracking.registry import CHAMPION, VM_MODEL

Trained = tuple[Settings, World, TrainReport]


@pytest.fixture
def watcher(trained: Trained) -> Iterator[ChampionWatcher]:
    """A watcher on the session's registry; the champion alias is put back afterwards (tests share it)."""
    client = registry.connect(trained[0])
    original = registry.resolve_champions(client).vm
    yield ChampionWatcher(client)
    registry.set_alias(client, VM_MODEL, CHAMPION, original)


def move_champion(trained: Trained, variant: str) -> str:
    version = trained[2].vms[variant].version
    registry.set_alias(registry.connect(trained[0]), VM_MODEL, CHAMPION, version)
    return version


def test_a_moved_alias_loads_the_new_vm(trained: Trained, watcher: ChampionWatcher, layout: Layout) -> None:
    watcher.refresh(wait=True)
    ranker = Ranker(layout.store, watcher)
    before = ranker.rank(1, np.array([10, 11]), T)

    new = move_champion(trained, "solaris_distilled")
    assert ranker.rank(1, np.array([10, 11]), T).vm_version == before.vm_version  # not before the load
    watcher.refresh(wait=True)
    after = ranker.rank(1, np.array([10, 11]), T)

    assert after.vm_version == new != before.vm_version
    assert after.embedding_version == before.embedding_version == layout.version
    assert not np.array_equal(after.scores, before.scores)


def test_a_champion_that_cannot_serve_keeps_the_current_vm(trained: Trained, watcher: ChampionWatcher) -> None:
    watcher.refresh(wait=True)
    serving = watcher.current
    move_champion(trained, "base")  # a VM without embeddings cannot serve the feature store's tiers
    watcher.refresh(wait=True)

    assert watcher.current is serving
    assert "embedding_version" in (watcher.last_error or "")


def test_requests_during_swaps_never_mix_a_vm_with_another_version(
    trained: Trained, watcher: ChampionWatcher, layout: Layout
) -> None:
    client = registry.connect(trained[0])
    variants = ("solaris", "solaris_distilled")
    models = {trained[2].vms[v].version: load_serving_model(client, trained[2].vms[v].version) for v in variants}
    watcher.refresh(wait=True)
    ranker = Ranker(layout.store, watcher)
    served, stop = [], threading.Event()

    def serve() -> None:
        while not stop.is_set():
            served.append(ranker.rank(1, np.array([10, 11, 12]), T))

    threads = [threading.Thread(target=serve) for _ in range(3)]
    for thread in threads:
        thread.start()
    for i in range(6):
        move_champion(trained, variants[i % 2])
        watcher.refresh(wait=True)
    stop.set()
    for thread in threads:
        thread.join()

    assert {s.vm_version for s in served} == set(models)
    for s in served:
        model: ServingModel = models[s.vm_version]
        assert s.embedding_version == model.pinned.embedding_version
        with torch.inference_mode():
            np.testing.assert_allclose(s.scores, model.vm(torch.from_numpy(s.inputs)).numpy(), rtol=1e-6)
