"""The VM the ranker serves, and how it follows ``solaris-vm@champion`` without a restart.

A :class:`ServingModel` binds a VM to the embedding version it was trained on; the ranker takes one
reference per request and uses both halves of it, so a request never mixes a VM with another version's
embeddings. A new champion is loaded in a background thread and swapped in by one reference assignment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass

from mlflow import MlflowClient

from solaris.models.vm import VerticalModel
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION, VM_MODEL, PinnedVersions
from solaris.embedding_version import check_embedding_version

log = logging.getLogger(__name__)


@dataclass(frozen=True)
class ServingModel:
    vm: VerticalModel
    pinned: PinnedVersions

    def __post_init__(self) -> None:
        if not self.vm.config.uses_embeddings:
            raise ValueError(f"{VM_MODEL} version {self.pinned.vm} is a {self.vm.config.variant} VM: it reads no embeddings")
        check_embedding_version(self.pinned.embedding_version, self.vm.config.embedding_version, f"VM {self.pinned.vm}")

    @property
    def code_dim(self) -> int:
        return self.vm.config.code_dim


def load_serving_model(client: MlflowClient, vm_version: str) -> ServingModel:
    pinned = registry.pinned_from_vm(client, vm_version)
    vm = registry.load_vm(vm_version)
    if not isinstance(vm, VerticalModel):
        raise ValueError(f"{VM_MODEL} version {vm_version} is not a vertical model")
    return ServingModel(vm.eval(), pinned)


class ChampionWatcher:
    """Holds the current :class:`ServingModel`; :meth:`refresh` loads a moved champion off the request path.

    A failed load keeps the model that serves (and is retried at the next refresh): a broken registry entry
    must not take the ranker down.
    """

    def __init__(self, client: MlflowClient, load: Callable[[MlflowClient, str], ServingModel] = load_serving_model):
        self._client = client
        self._load = load
        self._current: ServingModel | None = None
        self._loading = threading.Lock()
        self.last_error: str | None = None

    @property
    def current(self) -> ServingModel | None:
        return self._current

    def champion_version(self) -> str | None:
        found = registry.version_by_alias(self._client, VM_MODEL, CHAMPION)
        return None if found is None else str(found.version)

    def refresh(self, wait: bool = False) -> threading.Thread | None:
        """Start loading the champion if it moved; returns the loading thread (joined when ``wait``)."""
        if not self._loading.acquire(blocking=False):
            return None  # a load is already under way
        try:
            version = self.champion_version()
        except Exception as exc:  # MLflow unreachable: keep serving what we have
            self._loading.release()
            self.last_error = f"resolving @{CHAMPION}: {exc}"
            log.warning(self.last_error)
            return None
        if version is None or (self._current is not None and self._current.pinned.vm == version):
            self._loading.release()
            return None
        thread = threading.Thread(target=self._swap_to, args=(version,), name=f"load-vm-{version}", daemon=True)
        thread.start()
        if wait:
            thread.join()
        return thread

    def _swap_to(self, version: str) -> None:
        try:
            model = self._load(self._client, version)
            self._current = model
            self.last_error = None
            log.info("serving %s version %s (embedding version %s)", VM_MODEL, version, model.pinned.embedding_version)
        except Exception as exc:
            self.last_error = f"loading {VM_MODEL} version {version}: {exc}"
            log.warning(self.last_error)
        finally:
            self._loading.release()
