"""``solaris stack``: the local stack starts, runs ``solaris_precompute`` through Airflow's REST API as a user
would, and stops leaving no process behind.

One test on purpose: starting the stack costs ~30 s, the precompute run about a minute more on 2 cores.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import time
import urllib.error
import urllib.request
import uuid
from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path
from typing import Any

import psutil
import psycopg
import pytest

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.ops import procs
from solaris.ops.health import free_ports
from solaris.ops.stack import StackState, airflow_password, state_path
from solaris.precompute.spec import run_key
from solaris.store import open_store
from solaris.training.jobs import TrainReport, World

from precompute_env import precompute_settings

DAG = "solaris_precompute"
CONF = {"shards": 2, "batch_size": 2048, "device": "cpu", "ttl_hours": 4, "top_fraction": 0.2}
SOLARIS = Path(sys.executable).with_name("solaris")
RUN_TIMEOUT_S = 420


class Api:
    """Airflow's public REST API with the bearer token Airflow 3 requires (POST /auth/token)."""

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.token = self._call("POST", "/auth/token", {"username": username, "password": password})["access_token"]

    def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, path, body, {"Authorization": f"Bearer {self.token}"})

    def _call(self, method: str, path: str, body: dict[str, Any] | None, headers: dict[str, str] | None = None) -> Any:
        data = None if body is None else json.dumps(body).encode()
        request = urllib.request.Request(
            self.base + path, data=data, method=method, headers={"Content-Type": "application/json", **(headers or {})}
        )
        try:
            with urllib.request.urlopen(request, timeout=30) as answer:
                return json.loads(answer.read() or b"null")
        except urllib.error.HTTPError as exc:
            raise AssertionError(f"{method} {path}: HTTP {exc.code} {exc.read()[:2000]!r}") from None


def _solaris(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SOLARIS), *args], env=env, capture_output=True, text=True, timeout=600)


def _poll(what: str, fetch: Any, done: Any, timeout_s: float, explain: Any = lambda: "") -> Any:
    """Call ``fetch`` until ``done(result)``; fail with ``explain()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not done after {timeout_s:.0f} s (last: {result!r})\n{explain()}")
        time.sleep(2)


def _task_log_tails(settings: Settings, run_id: str, chars: int = 2500) -> str:
    run_logs = settings.airflow_home / "logs" / f"dag_id={DAG}" / f"run_id={run_id}"
    files = sorted(run_logs.rglob("*.log")) if run_logs.is_dir() else []
    scheduler = settings.data_dir / "stack" / "logs" / "airflow-scheduler.log"
    parts = [f"--- {p.relative_to(run_logs)}\n{p.read_text(errors='replace')[-chars:]}" for p in files]
    if scheduler.is_file():
        parts.append(f"--- scheduler\n{scheduler.read_text(errors='replace')[-chars:]}")
    return "\n".join(parts) or f"no task logs under {run_logs}"


@pytest.fixture
def airflow_database(pg_url: str) -> Iterator[str]:
    """A database name for this stack's Airflow metadata; ``solaris stack up`` creates it, we drop it."""
    name = f"solaris_stack_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


@pytest.mark.integration  # 2-3 minutes of a whole stack: beside the replay, not in the default suite
def test_stack_runs_precompute_through_airflow_and_stops_clean(
    trained: tuple[Settings, World, TrainReport], pg_url: str, airflow_database: str, tmp_path: Path
) -> None:
    settings = precompute_settings(trained[0], tmp_path)
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOLARIS_", "AIRFLOW"))} | settings.as_env()
    airflow_port, mlflow_port, ranker_port = free_ports("127.0.0.1", 3)
    marks = [time.monotonic()]
    up = _solaris(
        env, "stack", "up",
        "--airflow-port", str(airflow_port), "--mlflow-port", str(mlflow_port), "--ranker-port", str(ranker_port),
        "--postgres-admin-url", pg_url, "--airflow-database", airflow_database,
    )  # fmt: skip
    state = StackState.load(state_path(settings))
    started: list[psutil.Process] = []
    try:
        assert up.returncode == 0, f"stack up failed:\n{up.stdout}\n{up.stderr}"
        print(up.stdout)  # start-up seconds per service, shown with -s
        marks.append(time.monotonic())
        assert state is not None and f"/{airflow_database}" in state.metadata_url
        started = procs.members(state.procs)
        assert {p.name for p in state.procs} == {
            "mlflow", "airflow-api-server", "airflow-scheduler", "airflow-dag-processor", "airflow-triggerer", "ranker"
        }  # fmt: skip
        assert _solaris(env, "stack", "status").returncode == 0

        api = Api(state.urls["airflow"], "admin", airflow_password(state))
        _poll(f"{DAG} parsed", lambda: api("GET", "/api/v2/dags?dag_id_pattern=solaris")["dags"],
              lambda dags: DAG in {d["dag_id"] for d in dags}, 120)  # fmt: skip
        logical = EventLog(settings.world_dir()).start + timedelta(hours=30, minutes=20)
        run_id = f"stack_test_{uuid.uuid4().hex[:8]}"
        # Triggered while paused, with run_after at the logical date: the run unpausing schedules for the
        # wall-clock hour queues behind it (max_active_runs=1 starts the earliest run_after first).
        api("POST", f"/api/v2/dags/{DAG}/dagRuns", {
            "dag_run_id": run_id, "logical_date": logical.isoformat(), "run_after": logical.isoformat(), "conf": CONF,
        })  # fmt: skip
        assert api("PATCH", f"/api/v2/dags/{DAG}", {"is_paused": False})["is_paused"] is False
        final = _poll(
            f"dag run {run_id}", lambda: api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}")["state"],
            lambda s: s in ("success", "failed"), RUN_TIMEOUT_S, lambda: _task_log_tails(settings, run_id),
        )  # fmt: skip
        assert final == "success", _task_log_tails(settings, run_id)
        marks.append(time.monotonic())

        with open_store(settings.store_url) as store:
            record = store.get_run(run_key(logical.replace(minute=0)))
        assert record is not None and record.status == "succeeded" and record.counts["pairs_written"] > 0
        # The ranker found the champion chain through the stack's MLflow server.
        with urllib.request.urlopen(state.urls["ranker"] + "/readyz", timeout=10) as ready:
            assert ready.status == 200
        # The Airflow plugin's JSON, served by the api-server, shows the run as the store recorded it.
        with urllib.request.urlopen(state.urls["airflow"] + "/solaris/api/health", timeout=60) as answer:
            report = json.loads(answer.read())
        shown = {r["run_id"]: r for r in report["runs"]}
        assert shown[record.run_id]["status"] == "succeeded" and shown[record.run_id]["counts"] == record.counts
        assert report["champion"]["vm"] == record.vm_version, report["champion"]
    finally:
        if state is not None:
            started += procs.members(state.procs)  # task processes running now, too
        down = _solaris(env, "stack", "down")
    marks.append(time.monotonic())
    print("seconds: up, trigger to success, rest and down:", [round(b - a) for a, b in zip(marks, marks[1:])])
    assert down.returncode == 0, down.stderr
    assert not state_path(settings).exists()
    left = [p for p in started if _live(p)]
    assert not left, f"still running after stack down: {[(p.pid, p.name()) for p in left]}"
    leaders = {p.pid for p in state.procs}  # each service led its own process group and session
    stray = [p for p in psutil.process_iter() if _live(p) and _group_and_session(p) & leaders]
    assert not stray, f"processes left in the stack's groups or sessions: {[(p.pid, p.name()) for p in stray]}"


def _live(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _group_and_session(process: psutil.Process) -> set[int]:
    try:
        return {os.getpgid(process.pid), os.getsid(process.pid)}
    except ProcessLookupError:
        return set()
