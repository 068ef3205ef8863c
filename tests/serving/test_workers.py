"""`solaris serve --workers 2`: two server processes answer, and /metrics from either counts both."""

from __future__ import annotations

import os
import signal
from pathlib import Path

import httpx
from conftest import T
from serve_process import laid_out_settings, start_serve

from solaris.config import Settings
from solaris.serving.champion import ServingModel
from solaris.training.jobs import TrainReport, World


def candidates_served(metrics: str) -> float:
    return sum(
        float(line.split()[-1]) for line in metrics.splitlines() if line.startswith("solaris_rank_candidates_total{")
    )


def test_two_workers_serve_and_report_their_metrics_together(
    trained: tuple[Settings, World, TrainReport], champion: ServingModel, tmp_path: Path
) -> None:
    settings = laid_out_settings(trained[0], champion, tmp_path)
    server, base = start_serve(settings, "--workers", "2", "--no-served-log")
    try:
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
