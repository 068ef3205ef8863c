"""The local stack without Docker: Airflow 3 (api-server, scheduler, dag-processor, triggerer), the MLflow
tracking server and the ranker, each a managed process on localhost; with ``executor="celery"`` also one
Celery worker per queue (:mod:`.celery_workers`), Redis the broker and PostgreSQL the metadata DB; with
``live`` also the world's live traffic (``solaris data live``) on a clock that starts at the world's end when
the stack starts, which the DAGs are then scheduled on (:mod:`solaris.live`).

Not ``airflow standalone``: it cannot be stopped cleanly (SIGTERM orphans its children). Each service runs
in its own session; pids, start times and logs live under ``<data_dir>/stack`` (:mod:`.stack_state`) so
``down`` and ``status`` work from any later shell.

One tracking store, one writer: the MLflow server owns the settings' tracking database, and the Airflow
tasks and the ranker reach it through the server's URL (``SOLARIS_MLFLOW_TRACKING_URI`` is overridden in
their environment), as they do under docker-compose.
"""

from __future__ import annotations

import json
import os
import secrets
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from pathlib import Path
from typing import Literal, get_args

from solaris.airflow_env import bootstrap
from solaris.config import Settings
from solaris.live.clock import CLOCK_ENV, REAL_TIME_HOUR_SECONDS, LiveClock
from solaris.ops import celery_workers, health, metadata, mlflow_server, procs
from solaris.ops.health import HEARTBEAT_SCHEME, Check
from solaris.ops.stack_state import StackState, stack_dir, state_path, worker_data_dir
from solaris.store import open_configured_store

AIRFLOW_USER = "admin"
AIRFLOW_COMPONENTS = {
    "airflow-api-server": ("api-server", "metadatabase"),
    "airflow-scheduler": ("scheduler", "scheduler"),
    "airflow-dag-processor": ("dag-processor", "dag_processor"),
    "airflow-triggerer": ("triggerer", "triggerer"),
}
REPO = Path(__file__).resolve().parents[2]
SOLARIS_CLI = Path(sys.executable).with_name("solaris")
Executor = Literal["local", "celery"]
EXECUTORS: tuple[Executor, ...] = get_args(Executor)


@dataclass(frozen=True)
class StackConfig:
    """Ports, the Airflow metadata DB choice and timeouts; the defaults are a developer's machine."""

    host: str = "127.0.0.1"
    airflow_port: int = 8080
    mlflow_port: int = 5000
    ranker_port: int = 8000
    metadata_url: str | None = None  # an explicit Airflow metadata URL wins over the choice below
    postgres_admin_url: str | None = metadata.DEFAULT_ADMIN_URL  # None: SQLite without trying PostgreSQL
    airflow_database: str = metadata.DEFAULT_DATABASE
    executor: Executor = "local"
    broker_url: str = celery_workers.DEFAULT_BROKER_URL  # without its password: $REDIS_PASSWORD adds it
    live: bool = False  # run the world's live traffic and schedule the DAGs on its clock
    hour_seconds: float = REAL_TIME_HOUR_SECONDS  # wall seconds per simulated hour, when live
    start_timeout_s: float = 300.0
    stop_timeout_s: float = 30.0

    def ports(self) -> dict[str, int]:
        return {"airflow": self.airflow_port, "mlflow": self.mlflow_port, "ranker": self.ranker_port}


@dataclass(frozen=True)
class ManagedService:
    name: str
    argv: list[str]
    env: dict[str, str]
    check: Check


@dataclass(frozen=True)
class Started:
    state: StackState
    seconds_to_healthy: dict[str, float]


class StackError(RuntimeError):
    """The stack could not start or stop as asked; the message says what to do."""


def up(settings: Settings, config: StackConfig, say: Callable[[str], None] = print) -> Started:
    """Start every service, wait until each is healthy; on any failure stop what was started."""
    path = state_path(settings)
    running = StackState.load(path)
    if running is not None and any(p.alive() for p in running.procs):
        raise StackError(f"a stack is already running (state in {path}); run `solaris stack down` first")
    taken = [f"{name} port {port}" for name, port in config.ports().items() if not health.port_free(config.host, port)]
    if taken:
        raise StackError(f"already in use on {config.host}: {', '.join(taken)}; choose others (--<name>-port)")

    now = datetime.now(UTC)  # the wall clock, at the edge
    clock = live_clock(settings, config, now) if config.live else None
    metadata_url = choose_metadata_url(settings, config)
    executor = _executor_env(config, metadata_url)
    say(f"Airflow metadata DB: {_redacted(metadata_url)}; migrating")
    mlflow_url = f"http://{config.host}:{config.mlflow_port}"
    # Every service hands staged tables on at one location, named, not derived from its own data folder.
    ranker_url = f"http://{config.host}:{config.ranker_port}"
    served = settings.with_overrides(
        mlflow_tracking_uri=mlflow_url, staging_url=settings.staging_root, ranker_url=ranker_url
    )
    airflow = bootstrap(served, metadata_url) | _airflow_extras(config) | executor
    if swept := close_runs_left_running(settings, now):  # the store may be an Airflow connection: after bootstrap
        say(f"Marked failed {len(swept)} precompute run(s) the last stack left running: {', '.join(swept)}")
    if clock is not None:
        airflow[CLOCK_ENV] = clock.to_json()  # the DAGs' schedule is read where they are parsed
        # A live stack is there to watch the scheduler run: DAGs it parses first start unpaused.
        airflow["AIRFLOW__CORE__DAGS_ARE_PAUSED_AT_CREATION"] = "False"
    services = _services(settings, served, config, airflow)
    if clock is not None:
        services.append(_traffic(served, clock, ranker_url))

    logs = stack_dir(settings) / "logs"
    state = StackState(
        urls={
            "airflow": f"http://{config.host}:{config.airflow_port}",
            "mlflow": mlflow_url,
            "ranker": ranker_url,
        },
        metadata_url=_redacted(metadata_url),
        password_file=str(settings.airflow_home / "simple_auth_manager_passwords.json.generated"),
        procs=[],
        checks={s.name: s.check for s in services},
        clock=None if clock is None else clock.to_json(),
    )
    started_at = time.monotonic()
    try:
        for service in services:
            state.procs.append(procs.start(service.name, service.argv, service.env, logs / f"{service.name}.log", REPO))
            state.save(path)  # saved as it grows, so `down` can stop a half-started stack
        seconds = _wait_healthy(state, started_at, config.start_timeout_s)
    except BaseException:
        procs.stop(state.procs, config.stop_timeout_s)
        path.unlink(missing_ok=True)
        raise
    return Started(state, seconds)


def close_runs_left_running(settings: Settings, now: datetime) -> list[str]:
    """Close the run records a stopped stack left ``running``: no precompute runs while the stack is down."""
    with open_configured_store(settings, init=True) as store:
        return store.sweep_unfinished_runs("the stack stopped while it ran; found by solaris stack up", now)


def down(settings: Settings, timeout_s: float = 30.0) -> list[str]:
    """Stop everything ``up`` started; returns the names of the services that were running."""
    path = state_path(settings)
    state = StackState.load(path)
    if state is None:
        return []
    running = [p.name for p in state.procs if p.alive()]
    survivors = procs.stop(state.procs, timeout_s)
    if survivors:
        raise StackError(f"processes survived SIGKILL: {[(p.pid, p.name()) for p in survivors]}")
    path.unlink()
    return running


@dataclass(frozen=True)
class ServiceStatus:
    """``healthy``, ``running`` (its process is alive, its check fails: for a worker, it does not answer the
    broker's ping with its queues) or ``down``; ``detail`` names a worker's node and queues."""

    state: str
    detail: str = ""


def status(settings: Settings) -> dict[str, ServiceStatus]:
    state = StackState.load(state_path(settings))
    if state is None:
        return {}
    found = {}
    for proc in state.procs:
        check = state.checks[proc.name]
        alive = ("healthy" if health.probe(check) else "running") if proc.alive() else "down"
        detail = f"node {check.celery_node}, queues {','.join(check.queues)}" if check.celery_node else ""
        found[proc.name] = ServiceStatus(alive, detail)
    return found


def airflow_password(state: StackState) -> str:
    """The generated password of the stack's Airflow user (SimpleAuthManager writes it at api-server start)."""
    passwords = json.loads(Path(state.password_file).read_text())
    return passwords[AIRFLOW_USER]


def log_tail(proc: procs.Proc, chars: int = 3000) -> str:
    try:
        return proc.log.read_text(errors="replace")[-chars:]
    except FileNotFoundError:
        return ""


def live_clock(settings: Settings, config: StackConfig, wall_start: datetime) -> LiveClock:
    """The clock of a live stack (:func:`~solaris.live.traffic.resume_clock`), checked before anything starts."""
    from solaris.live.traffic import resume_clock

    try:
        return resume_clock(settings.world_dir(), config.hour_seconds, wall_start)
    except (ValueError, FileNotFoundError) as exc:
        raise StackError(f"cannot run live: {exc}") from None


def _traffic(settings: Settings, clock: LiveClock, ranker_url: str) -> ManagedService:
    """``solaris data live`` on the stack's clock, sending its requests to the stack's ranker; checked by its
    heartbeat."""
    heartbeat = stack_dir(settings) / "live-traffic.heartbeat"
    argv = [str(SOLARIS_CLI), "data", "live", "--heartbeat", str(heartbeat), "--ranker", ranker_url]
    env = _base_env() | settings.as_env() | {CLOCK_ENV: clock.to_json()}
    return ManagedService("live-traffic", argv, env, Check(f"{HEARTBEAT_SCHEME}{heartbeat}"))


def choose_metadata_url(settings: Settings, config: StackConfig) -> str:
    """The explicit URL, else PostgreSQL (database created if missing) when it answers, else SQLite."""
    if config.metadata_url:
        return config.metadata_url
    if config.postgres_admin_url:
        url = metadata.postgres_metadata_url(config.postgres_admin_url, config.airflow_database)
        if url is not None:
            return url
    return f"sqlite:///{settings.airflow_home / 'airflow.db'}"


def _airflow_extras(config: StackConfig) -> dict[str, str]:
    """What the separate Airflow processes must agree on, and sizes for 2 cores."""
    log_ports = health.free_ports(config.host, 2)
    return {
        # The scheduler's and triggerer's log servers (default 8793, 8794) must not collide with another
        # stack's; with LocalExecutor the api-server reads task logs from disk and never calls them.
        "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_ports[0]),
        "AIRFLOW__LOGGING__TRIGGER_LOG_SERVER_PORT": str(log_ports[1]),
        # Tasks reach the Execution API here; Airflow's default assumes localhost:8080.
        "AIRFLOW__CORE__EXECUTION_API_SERVER_URL": f"http://{config.host}:{config.airflow_port}/execution/",
        # The api-server signs the tasks' tokens, the scheduler issues them: one key for the stack's life.
        "AIRFLOW__API_AUTH__JWT_SECRET": secrets.token_urlsafe(32),
        "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{AIRFLOW_USER}:admin",
        "AIRFLOW__API__WORKERS": "1",
        "AIRFLOW__DAG_PROCESSOR__PARSING_PROCESSES": "1",
    }


def _executor_env(config: StackConfig, metadata_url: str) -> dict[str, str]:
    """The executor's settings, checked before anything starts: Celery needs PostgreSQL and a broker."""
    if config.executor == "local":
        return {"AIRFLOW__CORE__EXECUTOR": "solaris.ops.local_executor.PreloadingLocalExecutor"}
    if config.executor != "celery":
        raise StackError(f"executor {config.executor!r}: choose one of {', '.join(EXECUTORS)}")
    try:
        backend = celery_workers.result_backend(metadata_url)
        broker = celery_workers.broker_url(config.broker_url)
    except ValueError as exc:
        raise StackError(str(exc)) from None
    try:
        celery_workers.check_broker(broker)
    except ValueError as exc:
        raise StackError(f"the Celery broker at {config.broker_url} {exc}") from None
    return {
        "AIRFLOW__CORE__EXECUTOR": "CeleryExecutor",
        "AIRFLOW__CELERY__BROKER_URL": broker,
        "AIRFLOW__CELERY__RESULT_BACKEND": backend,
    }


def _workers(
    settings: Settings, config: StackConfig, base: dict[str, str], airflow: dict[str, str]
) -> list[ManagedService]:
    """One ``airflow celery worker`` per queue, each serving its task logs on a port of its own; a worker
    without local data gets an empty data folder (:attr:`~.celery_workers.WorkerSpec.local_data`)."""
    if config.executor != "celery":
        return []
    services = []
    for spec, log_port in zip(celery_workers.WORKERS, health.free_ports(config.host, len(celery_workers.WORKERS))):
        node = spec.node()
        argv = [
            sys.executable,
            "-m",
            "airflow",
            "celery",
            "worker",
            "--queues",
            ",".join(spec.queues),
            "--concurrency",
            str(spec.concurrency),
            "--celery-hostname",
            node,
        ]
        env = (
            base
            | airflow
            | {
                "AIRFLOW__LOGGING__WORKER_LOG_SERVER_PORT": str(log_port),
                "AIRFLOW__CORE__HOSTNAME_CALLABLE": "solaris.ops.celery_workers.task_hostname",
                celery_workers.WORKER_NAME_ENV: node,
            }
        )
        if not spec.local_data:
            env["SOLARIS_DATA_DIR"] = str(worker_data_dir(settings, spec.name))
        check = Check(config.broker_url, celery_node=node, queues=spec.queues)  # refused earlier if it held a password
        services.append(ManagedService(f"celery-worker-{spec.name}", argv, env, check))
    return services


def _base_env() -> dict[str, str]:
    """This shell's environment without the settings each service is given explicitly."""
    return {k: v for k, v in os.environ.items() if not k.startswith(("SOLARIS_", "AIRFLOW", "MLFLOW_"))}


def _services(
    settings: Settings, served: Settings, config: StackConfig, airflow: dict[str, str]
) -> list[ManagedService]:
    base = _base_env()
    health_url = f"http://{config.host}:{config.airflow_port}/api/v2/monitor/health"
    server = replace(mlflow_server.ServerConfig.load(), host=config.host, port=config.mlflow_port)
    services = [
        ManagedService(
            "mlflow",
            mlflow_server.command(settings, server),
            base | settings.as_env() | server.env,
            Check(f"http://{config.host}:{config.mlflow_port}/health"),
        )
    ]
    for name, (command, component) in AIRFLOW_COMPONENTS.items():
        argv = [sys.executable, "-m", "airflow", command]
        if command == "api-server":
            argv += ["--host", config.host, "--port", str(config.airflow_port)]
        services.append(ManagedService(name, argv, base | airflow, Check(health_url, component)))
    services += _workers(settings, config, base, airflow)
    services.append(
        ManagedService(
            "ranker",
            [str(SOLARIS_CLI), "serve", "--host", config.host, "--port", str(config.ranker_port)],
            base | served.as_env(),
            Check(f"http://{config.host}:{config.ranker_port}/healthz"),
        )
    )
    return services


def _wait_healthy(state: StackState, started_at: float, timeout_s: float) -> dict[str, float]:
    seconds: dict[str, float] = {}
    while len(seconds) < len(state.procs):
        for proc in state.procs:
            if proc.name in seconds:
                continue
            if not proc.alive():
                raise StackError(f"{proc.name} exited during start-up; its log ({proc.log}) ends:\n{log_tail(proc)}")
            if health.probe(state.checks[proc.name]):
                seconds[proc.name] = round(time.monotonic() - started_at, 1)
        if time.monotonic() - started_at > timeout_s:
            waiting = [p for p in state.procs if p.name not in seconds]
            tails = "\n".join(f"--- {p.name} ({p.log}):\n{log_tail(p, 1500)}" for p in waiting)
            raise StackError(f"not healthy after {timeout_s:.0f} s: {[p.name for p in waiting]}\n{tails}")
        time.sleep(0.5)
    return seconds


def _redacted(url: str) -> str:
    """The URL without a password, for output and the state file."""
    scheme, sep, rest = url.partition("://")
    credentials, at, host = rest.rpartition("@")
    if not at or ":" not in credentials:
        return url
    return f"{scheme}{sep}{credentials.split(':', 1)[0]}:***@{host}"
