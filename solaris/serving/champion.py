"""The VM the ranker serves, and how it follows ``solaris-vm-<name>@champion`` without a restart.

A :class:`ServingModel` binds a VM to the embedding version it was trained on; the ranker takes one
reference per request and uses both halves of it, so a request never mixes a VM with another version's
embeddings. A new champion is loaded in a background thread and swapped in by one reference assignment.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from dataclasses import dataclass, field

from mlflow.exceptions import MlflowException
from mlflow.protos.databricks_pb2 import INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST, ErrorCode

from mlflow import MlflowClient
from solaris.embedding_version import check_embedding_version
from solaris.enrichment.cohorts import CohortLookup
from solaris.models.vm import VerticalModel
from solaris.models.vm_numpy import NumpyVM
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION, PinnedVersions
from solaris.vms import registered_name

log = logging.getLogger(__name__)
# What MLflow answers for a registered model with no such alias, and for no such registered model.
NO_SUCH_ALIAS = frozenset(ErrorCode.Name(code) for code in (INVALID_PARAMETER_VALUE, RESOURCE_DOES_NOT_EXIST))


@dataclass(frozen=True)
class ServingModel:
    vm: VerticalModel
    pinned: PinnedVersions
    # The VM's users as cohort keys (the store's new-user cohort tier), built with the model, off the request path.
    cohorts: CohortLookup = field(init=False, repr=False, compare=False)
    # The VM's forward in numpy (the same scores, without torch's per-operation cost), built with the model too.
    scorer: NumpyVM = field(init=False, repr=False, compare=False)

    def __post_init__(self) -> None:
        if not self.vm.config.uses_embeddings:
            raise ValueError(
                f"{self.pinned.vm_model} version {self.pinned.vm} is a {self.vm.config.variant} VM: it reads no embeddings"
            )
        check_embedding_version(self.pinned.embedding_version, self.vm.config.embedding_version, f"VM {self.pinned.vm}")
        object.__setattr__(self, "cohorts", CohortLookup(self.vm.user))
        object.__setattr__(self, "scorer", NumpyVM(self.vm))

    @property
    def code_dim(self) -> int:
        return self.vm.config.code_dim


def load_serving_model(client: MlflowClient, vm_name: str, vm_version: str) -> ServingModel:
    pinned = registry.pinned_from_vm(client, vm_name, vm_version)
    vm = registry.load_vm(vm_name, vm_version)
    if not isinstance(vm, VerticalModel):
        raise ValueError(f"{pinned.vm_model} version {vm_version} is not a vertical model")
    return ServingModel(vm.eval(), pinned)


class ChampionWatcher:
    """Holds the current :class:`ServingModel`; :meth:`refresh` loads a moved champion off the request path.

    A failed load keeps the model that serves (and is retried at the next refresh): a broken registry entry
    must not take the ranker down. So does MLflow not answering. Each failure is logged, kept in
    ``last_error`` until a refresh succeeds, and handed to ``on_failure`` with its stage, ``resolve`` or
    ``load`` (the service counts them in /metrics).
    """

    def __init__(
        self,
        client: MlflowClient,
        vm_name: str,
        load: Callable[[MlflowClient, str, str], ServingModel] = load_serving_model,
        on_failure: Callable[[str], None] | None = None,
        check: Callable[[ServingModel], None] | None = None,
    ):
        """``check`` raises for a loaded model this service cannot serve (its embedding version is not the
        store's): it is refused like a model that failed to load."""
        self._client = client
        self.vm_name = vm_name
        self.check = check
        self._model_name = registered_name(vm_name)
        self._load = load
        self._current: ServingModel | None = None
        self._loading = threading.Lock()
        self.last_error: str | None = None
        self.on_failure = on_failure

    @property
    def current(self) -> ServingModel | None:
        return self._current

    def champion_version(self) -> str | None:
        """The version ``@champion`` names, None when there is none. MLflow failing to answer raises: it is
        not "no champion" (``registry.version_by_alias`` takes every MLflow error for one, and the watcher
        would then say nothing of an unreachable MLflow)."""
        try:
            found = self._client.get_model_version_by_alias(self._model_name, CHAMPION)
        except MlflowException as exc:
            if exc.error_code in NO_SUCH_ALIAS:
                return None
            raise
        return str(found.version)

    def refresh(self, wait: bool = False) -> threading.Thread | None:
        """Start loading the champion if it moved; returns the loading thread (joined when ``wait``)."""
        if not self._loading.acquire(blocking=False):
            return None  # a load is already under way
        try:
            version = self.champion_version()
        except Exception as exc:  # MLflow unreachable: keep serving what we have
            self._loading.release()
            self._failed("resolve", f"resolving @{CHAMPION}: {exc}")
            return None
        if version is None or (self._current is not None and self._current.pinned.vm == version):
            self.last_error = None  # MLflow answered and nothing is to load: an earlier failure is over
            self._loading.release()
            return None
        thread = threading.Thread(target=self._swap_to, args=(version,), name=f"load-vm-{version}", daemon=True)
        thread.start()
        if wait:
            thread.join()
        return thread

    def _swap_to(self, version: str) -> None:
        try:
            model = self._load(self._client, self.vm_name, version)
            if self.check is not None:
                self.check(model)
            self._current = model
            self.last_error = None
            log.info(
                "serving %s version %s (embedding version %s)",
                self._model_name,
                version,
                model.pinned.embedding_version,
            )
        except Exception as exc:
            self._failed("load", f"loading {self._model_name} version {version}: {exc}")
        finally:
            self._loading.release()

    def _failed(self, stage: str, message: str) -> None:
        self.last_error = message
        log.warning(message)
        if self.on_failure is not None:
            self.on_failure(stage)
