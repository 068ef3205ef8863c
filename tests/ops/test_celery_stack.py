"""The hourly DAG across Celery workers that share no disk (issue #18 items 2 and 3).

``solaris stack up --executor celery`` with Redis as the broker and PostgreSQL as Airflow's metadata DB; the
staging on an S3 endpoint (moto's, on localhost); the chain registered through the stack's MLflow server, so
its files are ``mlflow-artifacts:/`` behind the server. The ``gpu`` worker gets an empty data folder of its
own: its embedding tasks can only succeed from the staging and MLflow. A REST-triggered run with 4 shards
must succeed with each task on the queue and worker it belongs to, and leave the store exactly as the
in-process runner of the same nodes leaves another.
"""

from __future__ import annotations

import subprocess
import sys
import time
from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path

import psutil
import pytest
import torch
from mlflow_state import own_registry
from precompute_env import copy_chain, precompute_settings
from stack_session import Api, left_behind, solaris, stack_up, task_log_tails, trigger_and_wait
from store_state import store_checksum

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.ops import procs
from solaris.ops.stack import airflow_password
from solaris.ops.stack_state import worker_data_dir
from solaris.precompute.run import run_hour
from solaris.precompute.spec import run_key
from solaris.store import open_store
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World

DAG = "solaris_precompute"
# The verifier: this stack's fresh registry holds no demand model.
# The in-process reference runs the hour unsharded by user: the store must come out the same (issue #43 item 3).
REFERENCE = {
    "shards": 4,
    "batch_size": 2048,
    "device": "cpu",
    "ttl_hours": 4,
    "top_fraction": 0.2,
    "selector": "verifier",
}
CONF = REFERENCE | {"user_shards": 3}
GPU_TASKS = {"embed_shard", "shadow_embed_shard"}
RUN_TIMEOUT_S = 600


@pytest.mark.integration  # 5-8 minutes: two workers, a registry, a run of ~30 tasks and a reference run
@pytest.mark.timeout(1500)
def test_the_hourly_dag_runs_across_celery_workers_that_share_no_disk(
    trained: tuple[Settings, World, TrainReport], pg_url: str, airflow_database: str, s3_url: str, tmp_path: Path
) -> None:
    mlflow_root = tmp_path / "mlflow"
    settings = precompute_settings(trained[0], tmp_path / "celery").with_overrides(
        mlflow_tracking_uri=f"sqlite:///{mlflow_root / 'mlflow.db'}",
        mlflow_artifacts_dir=mlflow_root / "artifacts",
        staging_url=s3_url,
    )
    marks = [time.monotonic()]
    env, up, state = stack_up(settings, pg_url, airflow_database, "--executor", "celery")
    started: list[psutil.Process] = []
    try:
        assert up.returncode == 0, f"stack up failed:\n{up.stdout}\n{up.stderr}"
        assert state is not None
        started = procs.members(state.procs)
        nodes = {n.removeprefix("celery-worker-"): c.celery_node for n, c in state.checks.items() if c.celery_node}
        assert {"default", "gpu"} <= set(nodes), state.checks
        marks.append(time.monotonic())

        served = settings.with_overrides(mlflow_tracking_uri=state.urls["mlflow"])
        with own_registry(served) as client:
            chain = copy_chain(client, served, trained[1], trained[2])
            registry.set_chain_alias(client, chain, registry.CHAMPION)
            location = client.get_experiment_by_name("solaris-test-promotion").artifact_location
        assert location.startswith("mlflow-artifacts:"), location

        api = Api(state.urls["airflow"], "admin", airflow_password(state))
        logical = EventLog(settings.world_dir()).start + timedelta(hours=30, minutes=20)
        run_id, final = trigger_and_wait(api, settings, DAG, logical, CONF, RUN_TIMEOUT_S)
        assert final == "success", task_log_tails(settings, DAG, run_id)
        marks.append(time.monotonic())

        instances = api("GET", f"/api/v2/dags/{DAG}/dagRuns/{run_id}/taskInstances?limit=200")["task_instances"]
        done = [ti for ti in instances if ti["state"] == "success"]
        ran = {(ti["task_id"], ti["map_index"]): (ti["queue"], ti["hostname"]) for ti in done}
        assert {ti["task_id"] for ti in instances if ti["state"] != "success"} == {"mark_failed"}  # never called
        assert sorted(i for task, i in ran if task == "embed_shard") == [0, 1, 2, 3]
        assert sorted(i for task, i in ran if task == "select") == [0, 1, 2]  # on default, checked below
        for (task, index), placed in sorted(ran.items()):
            worker = "gpu" if task in GPU_TASKS else "default"
            assert placed == (worker, nodes[worker]), f"{task}[{index}] ran on {placed}, not the {worker} worker"
        gpu_data = worker_data_dir(settings, "gpu")
        assert not (gpu_data / "worlds").exists(), "the gpu worker's tasks found an event log they must not need"

        # The same hour by the in-process runner, one user shard, into a store and data folder of its own, same registry.
        reference = precompute_settings(trained[0], tmp_path / "reference").with_overrides(
            mlflow_tracking_uri=state.urls["mlflow"]
        )
        # With the torch threads a worker's fresh process has: this one kept the session's training setting (1),
        # and a matmul summed over other threads differs in a score's last bit (one row of 17,769, seen).
        with own_registry(reference), torch_threads(default_torch_threads()):
            run_hour(reference, logical, REFERENCE, clock=lambda: datetime(2030, 1, 1, tzinfo=UTC))
        marks.append(time.monotonic())
        with open_store(settings.store_url) as store:
            record = store.get_run(run_key(logical.replace(minute=0)))
        assert record is not None and record.status == "succeeded" and record.counts["pairs_written"] > 0
        assert store_checksum(settings.store_url) == store_checksum(reference.store_url)
    finally:
        if state is not None:
            started += procs.members(state.procs)
        down = solaris(env, "stack", "down")
    marks.append(time.monotonic())
    print(
        "seconds: up, trigger to success, reference run, rest and down:",
        [round(b - a) for a, b in zip(marks, marks[1:])],
    )
    assert down.returncode == 0, down.stderr
    assert not (left := left_behind(state, started)), f"still running after stack down: {left}"


def default_torch_threads() -> int:
    """torch's intra-op threads in a fresh process, as every stack worker starts."""
    done = subprocess.run(
        [sys.executable, "-c", "import torch; print(torch.get_num_threads())"],
        capture_output=True,
        text=True,
        check=True,
    )
    return int(done.stdout)


@contextmanager
def torch_threads(n: int) -> Iterator[None]:
    before = torch.get_num_threads()
    torch.set_num_threads(n)
    try:
        yield
    finally:
        torch.set_num_threads(before)
