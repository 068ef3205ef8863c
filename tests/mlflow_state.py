"""A test's own MLflow store, with MLflow's process-wide state put back afterwards.

``registry.connect`` sets MLflow's tracking and registry URIs for the whole process; the serving and
training tests share one session-wide trained registry, so a test that connects to a registry of its own
must restore them, or later tests would load from (and log into) the wrong store.
"""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager

from mlflow import MlflowClient
from mlflow.tracking import fluent
from mlflow.tracking._model_registry import utils as registry_utils
from mlflow.tracking._tracking_service import utils as tracking_utils

from solaris.config import Settings
from solaris.tracking import registry

MLFLOW_ENV = ("MLFLOW_TRACKING_URI", "MLFLOW_REGISTRY_URI", "MLFLOW_EXPERIMENT_ID")


@contextmanager
def own_registry(settings: Settings) -> Iterator[MlflowClient]:
    saved = (tracking_utils._tracking_uri, registry_utils._registry_uri, fluent._active_experiment_id)
    saved_env = {key: os.environ.get(key) for key in MLFLOW_ENV}
    try:
        yield registry.connect(settings)
    finally:
        tracking_utils._tracking_uri, registry_utils._registry_uri, fluent._active_experiment_id = saved
        for key, value in saved_env.items():
            if value is None:
                os.environ.pop(key, None)
            else:
                os.environ[key] = value
