"""A registered model loads on a host that shares no disk with the tracking server (issue #18 item 2).

``mlflow server --serve-artifacts`` as the stack starts it (:mod:`solaris.ops.mlflow_server`); a model logged
through its URL; then a fresh process in a fresh directory, given only that URL, loads it. In that process
MLflow's local-file artifact reader raises, so a load that reached into the server's artifact folder instead
of going over HTTP fails the test.
"""

from __future__ import annotations

import dataclasses
import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from local_service import serving
from mlflow_state import own_registry

import mlflow
from solaris.config import Settings
from solaris.models import files
from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.ops import mlflow_server
from solaris.ops.health import free_ports
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL

# The other host: no SOLARIS_* but the tracking URL, and MLflow's file artifact reader disabled.
OTHER_HOST = """
import json, sys
import numpy as np, torch
from mlflow.store.artifact import local_artifact_repo

def no_files(self, *args, **kwargs):
    raise RuntimeError(f"read the artifact folder directly: {self.artifact_dir}")

local_artifact_repo.LocalArtifactRepository.download_artifacts = no_files
local_artifact_repo.LocalArtifactRepository.list_artifacts = no_files

from solaris.config import Settings
from solaris.tracking import registry

registry.connect(Settings.from_env())
ae = registry.load_ae(sys.argv[1])
with torch.inference_mode():
    print(json.dumps(ae(torch.tensor(json.loads(sys.argv[2]), dtype=torch.float32)).tolist()))
"""


@pytest.fixture
def tracking_server(settings: Settings, tmp_path: Path) -> Iterator[str]:
    port = free_ports("127.0.0.1", 1)[0]
    config = dataclasses.replace(mlflow_server.ServerConfig.load(), port=port)
    assert config.serve_artifacts, "mlflow/server.toml must proxy artifacts"
    url = f"http://127.0.0.1:{port}"
    argv = mlflow_server.command(settings, config)
    with serving("the MLflow server", argv, url + "/health", tmp_path / "mlflow-server.log", os.environ | config.env):
        yield url


@pytest.mark.slow  # an MLflow server's start: 5-15 s
def test_a_model_loads_from_a_fresh_directory_with_only_the_tracking_url(
    settings: Settings, tracking_server: str, tmp_path: Path
) -> None:
    served = settings.with_overrides(mlflow_tracking_uri=tracking_server)
    torch.manual_seed(0)
    sample = np.random.default_rng(0).normal(size=(32, 6)).astype(np.float32)
    ae = Autoencoder(AEConfig(input_dim=6, code_dim=3, hidden=5, fm_version="1"), sample).eval()
    with own_registry(served) as client:
        experiment_id = registry.experiment(client, served, "solaris-over-http")
        location = client.get_experiment(experiment_id).artifact_location
        mlflow.set_experiment(experiment_id=experiment_id)
        with mlflow.start_run():
            version = registry.log_model(client, ae, AE_MODEL, ae.config.columns(), sample[:3], {"fm_version": "1"})
    assert location.startswith("mlflow-artifacts:"), location
    assert any(settings.mlflow_artifacts_dir.rglob(files.WEIGHTS_FILE)), "the server stored the files"

    fresh = tmp_path / "other-host"
    fresh.mkdir()
    env = {"PATH": os.environ["PATH"], "HOME": str(fresh), "SOLARIS_HOME": str(fresh)}
    env["SOLARIS_MLFLOW_TRACKING_URI"] = tracking_server
    x = sample[:4].tolist()
    loaded = subprocess.run(
        [sys.executable, "-c", OTHER_HOST, version, json.dumps(x)],
        env=env,
        cwd=fresh,
        capture_output=True,
        text=True,
        timeout=300,
    )
    assert loaded.returncode == 0, loaded.stderr[-3000:]
    with torch.inference_mode():
        expected = ae(torch.tensor(x)).numpy()
    np.testing.assert_allclose(np.array(json.loads(loaded.stdout.strip().splitlines()[-1])), expected, rtol=1e-6)
    assert not (fresh / "mlflow").exists(), "the other host kept no MLflow store of its own"
