"""A champion VM whose ``embedding_version`` tag disagrees with the version in its own config is refused.

The tag is what the ranker asks the store for; the config is what the VM was trained on. A mis-tagged VM
would score one version's embeddings with a model trained on another's, so loading it fails with an error
naming both, and the watcher keeps serving the model it had. Two tiny untrained VMs are logged to this
test's own MLflow store (no training, a few seconds).
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np
import pytest
import torch
from conftest import T, lay_out
from mlflow_state import own_registry
from precompute_env import LEAD

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.embedding_version import VersionMismatch, embedding_version
from solaris.models.features import IdTable
from solaris.models.vm import VerticalModel, VMConfig
from solaris.serving import Ranker
from solaris.serving.champion import ChampionWatcher, load_serving_model
from solaris.store import FeatureStore, SqliteStoreConfig, open_store
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHAMPION, FM_MODEL

VM_MODEL = LEAD.registered_name

DIM = 8


@pytest.fixture
def client(settings: Settings) -> Iterator[MlflowClient]:
    """A client on this test's own MLflow store (see mlflow_state)."""
    with own_registry(settings) as own:
        yield own


def tiny_vm(trained_on: str, seed: int) -> VerticalModel:
    users = IdTable(features=np.arange(1, 6, dtype=np.int64)[:, None] % 3, names=("u_group",))
    items = IdTable(features=np.arange(1, 41, dtype=np.int64)[:, None] % 4, names=("i_group",))
    config = VMConfig(
        variant="solaris", code_dim=DIM, id_dim=4, context_dim=2, hidden=(8,), embedding_version=trained_on
    )
    torch.manual_seed(seed)
    return VerticalModel(config, users, items).eval()


def log_vm(client: MlflowClient, settings: Settings, model: VerticalModel, tag: str) -> str:
    """Register ``model`` as a solaris-vm version tagged ``embedding_version=tag``, as training logs a VM."""
    example = np.zeros((2, len(model.config.columns())), np.float32)
    example[:, 1] = [10, 11]
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-vm"))
    with mlflow.start_run():
        return registry.log_model(
            client,
            model,
            VM_MODEL,
            model.config.columns(),
            example,
            {"role": "vm", "variant": model.config.variant, "embedding_version": tag},
        )


@pytest.fixture
def chain(client: MlflowClient) -> str:
    """FM and AE versions (tags only, no files), aliased @champion; returns their embedding version."""
    versions: list[str] = []
    for name, role in ((FM_MODEL, "fm"), (AE_MODEL, "ae")):
        tags = {"role": role} | ({"fm_version": versions[0]} if versions else {})
        client.create_registered_model(name)
        versions.append(str(client.create_model_version(name, source="file:///nowhere", tags=tags).version))
        client.set_registered_model_alias(name, CHAMPION, versions[-1])
    return embedding_version(*versions, DIM)


@pytest.fixture
def store(settings: Settings) -> Iterator[FeatureStore]:
    opened = open_store(SqliteStoreConfig(settings.home / "store.db"), init=True)
    yield opened
    opened.close()


def test_a_mis_tagged_champion_is_refused_naming_both_versions_and_the_ranker_keeps_its_vm(
    client: MlflowClient, settings: Settings, chain: str, store: FeatureStore
) -> None:
    good = log_vm(client, settings, tiny_vm(chain, seed=1), tag=chain)
    other = embedding_version("7", "9", DIM)  # what the second VM was really trained on
    mis_tagged = log_vm(client, settings, tiny_vm(other, seed=2), tag=chain)
    assert client.get_model_version(VM_MODEL, mis_tagged).tags["embedding_version"] == chain != other

    registry.set_alias(client, VM_MODEL, CHAMPION, good)
    watcher = ChampionWatcher(client, LEAD.name)
    watcher.refresh(wait=True)
    serving = watcher.current
    assert serving is not None and serving.pinned.vm == good and watcher.last_error is None
    layout = lay_out(store, serving)
    assert layout.version == chain
    ranker = Ranker(store, watcher)
    try:
        before = ranker.rank(1, np.array([10, 11]), T)
        assert before.vm_version == good

        registry.set_alias(client, VM_MODEL, CHAMPION, mis_tagged)
        watcher.refresh(wait=True)

        assert watcher.current is serving
        error = watcher.last_error or ""
        assert f"version {mis_tagged}" in error and chain in error and other in error
        after = ranker.rank(1, np.array([10, 11]), T)
        assert (after.vm_version, after.embedding_version) == (good, chain)
        np.testing.assert_array_equal(after.scores, before.scores)

        watcher.refresh(wait=True)  # retried at each refresh, refused each time
        assert watcher.current is serving and other in (watcher.last_error or "")
    finally:
        ranker.close()

    with pytest.raises(VersionMismatch, match=f"expects embedding version {chain}, got embeddings of version {other}"):
        load_serving_model(client, LEAD.name, mis_tagged)
