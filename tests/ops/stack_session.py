"""What the whole-stack tests share: Airflow's REST API with its token, the ``solaris`` command, starting the
stack, triggering a DAG and waiting for it with the task logs on failure, and finding processes a stack left
behind. Their metadata database of the test's own is a fixture, in conftest.py."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
import uuid
from datetime import datetime
from pathlib import Path
from typing import Any

import psutil
from local_service import poll

from solaris.config import Settings
from solaris.ops.health import free_ports
from solaris.ops.stack_state import StackState, state_path

SOLARIS = Path(sys.executable).with_name("solaris")


class Api:
    """Airflow's public REST API with the bearer token Airflow 3 requires (POST /auth/token)."""

    def __init__(self, base: str, username: str, password: str) -> None:
        self.base = base
        self.token = self._call("POST", "/auth/token", {"username": username, "password": password})["access_token"]

    def __call__(self, method: str, path: str, body: dict[str, Any] | None = None) -> Any:
        return self._call(method, path, body, {"Authorization": f"Bearer {self.token}"})

    def solaris_health(self, query: str = "") -> dict[str, Any]:
        """The SOLARIS page's JSON, behind Airflow's login like the REST API; also its body when it answers 503
        (the report is not ok)."""
        request = urllib.request.Request(
            f"{self.base}/solaris/api/health{query}", headers={"Authorization": f"Bearer {self.token}"}
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as answer:
                return json.loads(answer.read())
        except urllib.error.HTTPError as exc:
            if exc.code != 503:
                raise AssertionError(f"/solaris/api/health: HTTP {exc.code} {exc.read()[:2000]!r}") from None
            return json.loads(exc.read())

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


def solaris(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([str(SOLARIS), *args], env=env, capture_output=True, text=True, timeout=600)


def task_log_tails(settings: Settings, dag: str, run_id: str, chars: int = 2500) -> str:
    run_logs = settings.airflow_home / "logs" / f"dag_id={dag}" / f"run_id={run_id}"
    files = sorted(run_logs.rglob("*.log")) if run_logs.is_dir() else []
    scheduler = settings.data_dir / "stack" / "logs" / "airflow-scheduler.log"
    parts = [f"--- {p.relative_to(run_logs)}\n{p.read_text(errors='replace')[-chars:]}" for p in files]
    if scheduler.is_file():
        parts.append(f"--- scheduler\n{scheduler.read_text(errors='replace')[-chars:]}")
    return "\n".join(parts) or f"no task logs under {run_logs}"


def stack_up(
    settings: Settings, pg_url: str, airflow_database: str, *options: str
) -> tuple[dict[str, str], subprocess.CompletedProcess[str], StackState | None]:
    """``solaris stack up`` on free ports for ``settings`` (as the only SOLARIS_*/AIRFLOW* variables), its
    metadata in ``airflow_database``; returns the environment for later commands, the result and the state."""
    env = {k: v for k, v in os.environ.items() if not k.startswith(("SOLARIS_", "AIRFLOW"))} | settings.as_env()
    airflow_port, mlflow_port, ranker_port = free_ports("127.0.0.1", 3)
    up = solaris(
        env,
        "stack",
        "up",
        *options,
        "--airflow-port",
        str(airflow_port),
        "--mlflow-port",
        str(mlflow_port),
        "--ranker-port",
        str(ranker_port),
        "--postgres-admin-url",
        pg_url,
        "--airflow-database",
        airflow_database,
    )
    return env, up, StackState.load(state_path(settings))


def trigger_and_wait(
    api: Api, settings: Settings, dag: str, logical: datetime, conf: dict[str, Any], timeout_s: float
) -> tuple[str, str]:
    """Trigger ``dag`` for ``logical`` as a user does through the REST API and wait for its end; returns the
    run id and its final state. Triggered while paused, with run_after at the logical date: the run that
    unpausing schedules for the wall-clock hour queues behind it (max_active_runs=1 starts the earliest
    run_after first), and the DAG is paused again once this run ended."""
    poll(
        f"{dag} parsed",
        lambda: api("GET", "/api/v2/dags?dag_id_pattern=solaris")["dags"],
        lambda dags: dag in {d["dag_id"] for d in dags},
        120,
    )
    run_id = f"stack_test_{uuid.uuid4().hex[:8]}"
    api(
        "POST",
        f"/api/v2/dags/{dag}/dagRuns",
        {
            "dag_run_id": run_id,
            "logical_date": logical.isoformat(),
            "run_after": logical.isoformat(),
            "conf": conf,
        },
    )
    assert api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": False})["is_paused"] is False
    final = poll(
        f"dag run {run_id}",
        lambda: api("GET", f"/api/v2/dags/{dag}/dagRuns/{run_id}")["state"],
        lambda s: s in ("success", "failed"),
        timeout_s,
        lambda: task_log_tails(settings, dag, run_id),
    )
    api("PATCH", f"/api/v2/dags/{dag}", {"is_paused": True})
    return run_id, final


def live(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def group_and_session(process: psutil.Process) -> set[int]:
    try:
        return {os.getpgid(process.pid), os.getsid(process.pid)}
    except ProcessLookupError:
        return set()


def left_behind(state: Any, started: list[psutil.Process]) -> list[str]:
    """Processes alive after ``stack down``: any the stack started, or any in its services' groups or sessions."""
    left = [p for p in started if live(p)]
    leaders = {p.pid for p in state.procs}  # each service led its own process group and session
    left += [p for p in psutil.process_iter() if live(p) and group_and_session(p) & leaders]
    return sorted({f"{p.pid} {p.name()}" for p in left})
