"""``solaris stack up|down|status|mlflow``: the local stack (Airflow, MLflow, ranker) without Docker."""

from __future__ import annotations

import argparse
import os
import sys

from solaris.ops.celery_workers import BROKER_PASSWORD_ENV, DEFAULT_BROKER_URL
from solaris.ops.metadata import DEFAULT_ADMIN_URL, DEFAULT_DATABASE
from solaris.ops.stack import EXECUTORS


def add_parser(sub: argparse._SubParsersAction) -> None:
    stack = sub.add_parser("stack", help="start, stop or inspect the local Airflow + MLflow + ranker stack")
    ssub = stack.add_subparsers(dest="stack_command", required=True, metavar="ACTION")

    up = ssub.add_parser("up", help="start every service, wait until healthy, print the URLs and the login")
    up.add_argument("--host", default="127.0.0.1", help="interface every service binds")
    up.add_argument("--airflow-port", type=int, default=8080)
    up.add_argument("--mlflow-port", type=int, default=5000)
    up.add_argument("--ranker-port", type=int, default=8000)
    db = up.add_mutually_exclusive_group()
    db.add_argument("--metadata-url", help="Airflow's metadata DB (sqlite:///… or postgresql+psycopg://…)")
    db.add_argument("--sqlite", action="store_true", help="SQLite metadata DB without trying PostgreSQL")
    up.add_argument(
        "--postgres-admin-url",
        default=DEFAULT_ADMIN_URL,
        help=f"use (creating it) database --airflow-database on this server when it answers ({DEFAULT_ADMIN_URL})",
    )
    up.add_argument("--airflow-database", default=DEFAULT_DATABASE)
    up.add_argument(
        "--executor",
        choices=EXECUTORS,
        default="local",
        help="local: tasks run under the scheduler; celery: on one Celery worker per queue (default, gpu), "
        "needs PostgreSQL metadata and the broker",
    )
    up.add_argument(
        "--broker-url",
        default=DEFAULT_BROKER_URL,
        help=f"the Celery broker, without its password (${BROKER_PASSWORD_ENV} where set) ({DEFAULT_BROKER_URL})",
    )
    up.add_argument(
        "--live",
        action="store_true",
        help="continue the world as live traffic (solaris data live) and schedule the DAGs on its clock",
    )
    up.add_argument(
        "--hour-seconds",
        type=float,
        default=3600.0,
        metavar="N",
        help="with --live: wall seconds per simulated hour (default 3600: real time)",
    )
    up.add_argument("--timeout", type=float, default=300.0, help="seconds to wait for every service to be healthy")
    up.set_defaults(handler=stack_up)

    down = ssub.add_parser("down", help="stop every process the stack started")
    down.add_argument("--timeout", type=float, default=30.0, help="seconds between SIGTERM and SIGKILL")
    down.set_defaults(handler=stack_down)

    status = ssub.add_parser("status", help="each service: healthy, running (not answering) or down")
    status.set_defaults(handler=stack_status)

    mlflow = ssub.add_parser("mlflow", help="run the MLflow tracking server in the foreground (mlflow/server.toml)")
    mlflow.add_argument("--host", help="override [server] host")
    mlflow.add_argument("--port", type=int, help="override [server] port")
    mlflow.add_argument("--allowed-hosts", help="Host headers to accept, e.g. the compose service name")
    mlflow.set_defaults(handler=run_mlflow)


def stack_up(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.live.clock import LiveClock
    from solaris.ops.stack import StackConfig, StackError, airflow_password, up

    config = StackConfig(
        host=args.host,
        airflow_port=args.airflow_port,
        mlflow_port=args.mlflow_port,
        ranker_port=args.ranker_port,
        metadata_url=args.metadata_url,
        postgres_admin_url=None if args.sqlite else args.postgres_admin_url,
        airflow_database=args.airflow_database,
        executor=args.executor,
        broker_url=args.broker_url,
        live=args.live,
        hour_seconds=args.hour_seconds,
        start_timeout_s=args.timeout,
    )
    try:
        started = up(get_settings(), config)
    except StackError as exc:
        print(f"solaris: error: {exc}", file=sys.stderr)
        return 1
    state = started.state
    for name, seconds in started.seconds_to_healthy.items():
        print(f"{name:<22} healthy after {seconds:5.1f} s")
    print(f"\nAirflow  {state.urls['airflow']}  (login admin / {airflow_password(state)}, from {state.password_file})")
    print(f"MLflow   {state.urls['mlflow']}")
    print(f"Ranker   {state.urls['ranker']}  (POST /rank, /readyz, /metrics)")
    print(f"Airflow metadata DB: {state.metadata_url}")
    for name, check in state.checks.items():
        if check.celery_node:
            print(f"{name:<22} node {check.celery_node}, queues {','.join(check.queues)}, broker {check.url}")
    if state.clock is not None:
        clock = LiveClock.from_json(state.clock)
        print(f"Live: simulated time resumes at {clock.sim_start.isoformat()}, one hour every {clock.hour_seconds:g} s")
    print("Stop with: solaris stack down")
    return 0


def stack_down(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.ops.stack import StackError, down

    try:
        stopped = down(get_settings(), args.timeout)
    except StackError as exc:
        print(f"solaris: error: {exc}", file=sys.stderr)
        return 1
    print(f"stopped: {', '.join(stopped)}" if stopped else "no stack was running")
    return 0


def stack_status(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.ops.stack import status

    states = status(get_settings())
    if not states:
        print("no stack started (solaris stack up)")
        return 1
    for name, service in states.items():
        print(f"{name:<22} {service.state:<8} {service.detail}".rstrip())
    return 0 if all(s.state == "healthy" for s in states.values()) else 1


def run_mlflow(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from solaris.config import get_settings
    from solaris.ops.mlflow_server import ServerConfig, command

    config = ServerConfig.load()
    overrides = {"host": args.host, "port": args.port, "allowed_hosts": args.allowed_hosts}
    config = replace(config, **{k: v for k, v in overrides.items() if v is not None})
    argv = command(get_settings(), config)
    os.execve(argv[0], argv, os.environ | config.env)
