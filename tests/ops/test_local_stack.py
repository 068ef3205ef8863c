"""``solaris stack``: the local stack starts, runs ``solaris_precompute`` through Airflow's REST API as a user
would, and stops leaving no process behind.

One test on purpose: starting the stack costs ~30 s, the precompute run about a minute more on 2 cores.
"""

from __future__ import annotations

import json
import time
import urllib.error
import urllib.request
from datetime import timedelta
from pathlib import Path

import psutil
import pytest
from local_service import poll
from precompute_env import precompute_settings
from stack_session import Api, left_behind, solaris, stack_up, task_log_tails, trigger_and_wait

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.ops import procs
from solaris.ops.stack import airflow_password
from solaris.ops.stack_state import state_path
from solaris.precompute.spec import run_key
from solaris.store import open_store
from solaris.training.jobs import TrainReport, World

DAG = "solaris_precompute"
CONF = {"shards": 2, "batch_size": 2048, "device": "cpu", "ttl_hours": 4, "top_fraction": 0.2}
RUN_TIMEOUT_S = 420


def readiness(ranker_url: str) -> str:
    """/readyz's status: ``degraded`` while the store lacks the champion's embedding version, then ``ready``."""
    try:
        with urllib.request.urlopen(ranker_url + "/readyz", timeout=10) as ready:
            return json.loads(ready.read())["status"]
    except urllib.error.HTTPError as exc:
        return f"HTTP {exc.code}"


@pytest.mark.integration  # 2-3 minutes of a whole stack: beside the replay, not in the default suite
def test_stack_runs_precompute_through_airflow_and_stops_clean(
    trained: tuple[Settings, World, TrainReport], pg_url: str, airflow_database: str, tmp_path: Path
) -> None:
    settings = precompute_settings(trained[0], tmp_path)
    marks = [time.monotonic()]
    env, up, state = stack_up(settings, pg_url, airflow_database)
    started: list[psutil.Process] = []
    try:
        assert up.returncode == 0, f"stack up failed:\n{up.stdout}\n{up.stderr}"
        print(up.stdout)  # start-up seconds per service, shown with -s
        marks.append(time.monotonic())
        assert state is not None and f"/{airflow_database}" in state.metadata_url
        started = procs.members(state.procs)
        assert {p.name for p in state.procs} == {
            "mlflow",
            "airflow-api-server",
            "airflow-scheduler",
            "airflow-dag-processor",
            "airflow-triggerer",
            "ranker",
        }
        assert solaris(env, "stack", "status").returncode == 0

        api = Api(state.urls["airflow"], "admin", airflow_password(state))
        logical = EventLog(settings.world_dir()).start + timedelta(hours=30, minutes=20)
        run_id, final = trigger_and_wait(api, settings, DAG, logical, CONF, RUN_TIMEOUT_S)
        assert final == "success", task_log_tails(settings, DAG, run_id)
        marks.append(time.monotonic())

        with open_store(settings.store_url) as store:
            record = store.get_run(run_key(logical.replace(minute=0)))
        assert record is not None and record.status == "succeeded" and record.counts["pairs_written"] > 0
        # The ranker found the champion chain through the stack's MLflow server and, degraded to tier none on the
        # fresh store, upgraded at a poll once this run registered the chain's embedding version.
        poll("the ranker ready", lambda: readiness(state.urls["ranker"]), lambda status: status == "ready", 90)
        # The Airflow plugin's JSON, served by the api-server behind its login, shows the run as the store
        # recorded it, and reads the ranker's /metrics (the stack tells the page where the ranker is).
        report = api.solaris_health()
        shown = {r["run_id"]: r for r in report["runs"]}
        assert shown[record.run_id]["status"] == "succeeded" and shown[record.run_id]["counts"] == record.counts
        assert report["champion"]["vm"] == record.vm_version, report["champion"]
        readings = {r["check"]: r for r in report["status"]["readings"]}
        assert "/metrics" in readings["degraded_vms"]["message"] and readings["degraded_vms"]["value"] == 0
    finally:
        if state is not None:
            started += procs.members(state.procs)  # task processes running now, too
        down = solaris(env, "stack", "down")
    marks.append(time.monotonic())
    print("seconds: up, trigger to success, rest and down:", [round(b - a) for a, b in zip(marks, marks[1:])])
    assert down.returncode == 0, down.stderr
    assert not state_path(settings).exists()
    assert not (left := left_behind(state, started)), f"still running after stack down: {left}"
