"""The ranker's warnings reach its log after MLflow's PyTorch flavour is imported (issue #17).

Importing ``mlflow.pytorch`` runs ``logging.basicConfig(level=logging.ERROR)``: the root logger drops
warnings from then on. The first model load imports it, so a server that relied on the root logger would
never report a champion it cannot load. A fresh interpreter runs the server's own start-up
(``app_from_env``, as each uvicorn worker does) with a watcher whose load imports ``mlflow.pytorch`` and
then fails, and the warning must be on stderr, once.
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from solaris.serving.app import CONFIG_ENV, ServiceConfig

SERVER = r"""
import sys
from pathlib import Path

from fastapi.testclient import TestClient

from solaris.serving import app as serving
from solaris.serving.champion import ChampionWatcher
from solaris.store import SqliteStoreConfig, open_store


def load(client, vm_name, version):
    import mlflow.pytorch  # what registry.load_vm does first: the root logger goes to ERROR

    raise ValueError("the run has no embedding_version tag")


class Watcher(ChampionWatcher):
    def champion_version(self):
        return "1"


store = open_store(SqliteStoreConfig(Path(sys.argv[1])), init=True)
serving.service_from_settings = lambda settings, config: serving.build_service(store, {"ctr": Watcher(None, "ctr", load)}, config)
with TestClient(serving.app_from_env()) as client:
    assert client.get("/readyz").status_code == 503
    print("answered", client.get("/readyz").json()["detail"])
"""


def test_a_watcher_warning_reaches_stderr_after_mlflow_pytorch_is_imported(tmp_path: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith("SOLARIS_")} | {
        "SOLARIS_HOME": str(tmp_path),
        CONFIG_ENV: ServiceConfig(poll_seconds=3600).to_json(),
    }
    done = subprocess.run(
        [sys.executable, "-c", SERVER, str(tmp_path / "store.db")], env=env, capture_output=True, text=True, timeout=300
    )

    assert done.returncode == 0, done.stderr[-3000:]
    warning = "loading solaris-vm-ctr version 1: the run has no embedding_version tag"
    assert warning in done.stdout  # /readyz said why
    assert done.stderr.count(warning) == 1, done.stderr[-3000:]
    line = next(line for line in done.stderr.splitlines() if warning in line)
    assert "WARNING" in line and "solaris.serving.champion" in line
