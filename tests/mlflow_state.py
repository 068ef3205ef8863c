"""A test's own MLflow store, with MLflow's process-wide state put back afterwards; an MLflow tracking server
over HTTP, for the tests that need MLflow to be a network service (one that can stop answering).

``registry.connect`` sets MLflow's tracking and registry URIs for the whole process; the serving and
training tests share one session-wide trained registry, so a test that connects to a registry of its own
must restore them, or later tests would load from (and log into) the wrong store.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from collections.abc import Iterator
from contextlib import contextmanager

from mlflow.tracking import fluent
from mlflow.tracking._model_registry import utils as registry_utils
from mlflow.tracking._tracking_service import utils as tracking_utils

from mlflow import MlflowClient
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


# MLflow's Flask app on a free port (no gunicorn, no UI build): what `mlflow server` serves, started in seconds.
SERVER = textwrap.dedent(
    """
    import logging
    from werkzeug.serving import make_server
    from mlflow.server import app
    logging.getLogger("werkzeug").setLevel(logging.ERROR)  # no access log
    server = make_server("127.0.0.1", 0, app, threaded=True)
    print(server.server_port, flush=True)
    server.serve_forever()
    """
)


@contextmanager
def mlflow_http_server(store_uri: str) -> Iterator[int]:
    """An MLflow tracking server over ``store_uri`` in a child process; yields its port."""
    env = os.environ | {"_MLFLOW_SERVER_FILE_STORE": store_uri, "_MLFLOW_SERVER_REGISTRY_STORE": store_uri}
    server = subprocess.Popen([sys.executable, "-c", SERVER], env=env, stdout=subprocess.PIPE, text=True)
    try:
        port = server.stdout.readline().strip()
        assert port.isdigit(), f"the MLflow server did not start (exit status {server.poll()})"
        yield int(port)
    finally:
        server.kill()
        server.wait(timeout=10)
