"""`solaris serve --workers 2`: two server processes answer, and /metrics from either counts both."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import T, lay_out

from solaris.config import Settings
from solaris.serving.champion import ServingModel
from solaris.store import SqliteStoreConfig, open_store
from solaris.training.jobs import TrainReport, World


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def candidates_served(metrics: str) -> float:
    return sum(float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("solaris_rank_candidates_total{"))


def test_two_workers_serve_and_report_their_metrics_together(
    trained: tuple[Settings, World, TrainReport], champion: ServingModel, tmp_path: Path
) -> None:
    with open_store(SqliteStoreConfig(tmp_path / "store.db"), init=True) as store:
        lay_out(store, champion)
    settings = trained[0].with_overrides(data_dir=tmp_path / "var", store_url=f"sqlite:///{tmp_path / 'store.db'}")
    port = free_port()
    command = [str(Path(sys.executable).parent / "solaris"), "serve", "--workers", "2", "--port", str(port), "--no-served-log"]
    server = subprocess.Popen(command, env=os.environ | settings.as_env(), start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            assert server.poll() is None, f"solaris serve exited with {server.returncode}"
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    break
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, "the workers did not become ready in 120 s"
            time.sleep(0.5)
        with httpx.Client(base_url=base) as client:  # a new connection per request spreads them over workers
            answers = [
                httpx.post(f"{base}/rank", json={"user_id": 1, "items": [10, 11, 12], "at": T.isoformat()})
                for _ in range(20)
            ]
            assert {a.status_code for a in answers} == {200}
            assert all(a.json()["tiers"] == ["pair", "agg", "agg"] for a in answers)
            scrapes = [candidates_served(client.get("/metrics").text) for _ in range(6)]
        assert scrapes == [60.0] * 6
        assert len(list((settings.data_dir / "serve-metrics").glob("*.db"))) >= 2  # both workers wrote values
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
