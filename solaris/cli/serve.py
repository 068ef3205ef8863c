"""``solaris serve``: the ranker's HTTP service on the configured store and MLflow registry."""

from __future__ import annotations

import argparse


def add_parser(sub: argparse._SubParsersAction) -> None:
    serve = sub.add_parser("serve", help="run the ranker's HTTP service (POST /rank, /healthz, /readyz, /metrics)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    serve.add_argument("--max-candidates", type=int, default=1000, help="most candidates one request may carry")
    serve.add_argument(
        "--store-timeout-ms", type=float, default=50.0, help="slower store reads are served as tier none"
    )
    serve.add_argument(
        "--poll-seconds", type=float, default=30.0, help="how often to check each VM's solaris-vm-<name>@champion"
    )
    serve.add_argument(
        "--max-body-bytes",
        type=int,
        default=1 << 20,
        help="larger request bodies are answered 413 unread (default 1 MiB)",
    )
    serve.add_argument("--no-served-log", action="store_true", help="do not log features as served")
    serve.add_argument(
        "--workers", type=int, default=1, help="server processes; one per core (the VM and FastAPI hold the GIL)"
    )
    serve.set_defaults(handler=run_service)


def run_service(args: argparse.Namespace) -> int:
    import os
    import shutil

    import uvicorn

    from solaris.config import get_settings
    from solaris.serving.app import CONFIG_ENV, ServiceConfig
    from solaris.serving.metrics import MULTIPROCESS_DIR_ENV
    from solaris.store import open_configured_store

    if args.workers < 1:
        raise ValueError(f"--workers must be at least 1, got {args.workers}")
    if not 0 <= args.port <= 65535:  # uvicorn would start the app, fail to bind, and hang instead of exiting
        raise ValueError(f"--port must be in [0, 65535], got {args.port}")
    settings = get_settings()
    config = ServiceConfig(
        max_candidates=args.max_candidates,
        store_timeout_ms=args.store_timeout_ms,
        poll_seconds=args.poll_seconds,
        max_body_bytes=args.max_body_bytes,
        served_log_dir=None if args.no_served_log else settings.served_root,
    )
    with open_configured_store(settings, init=True):
        pass  # a store with no tables yet gets them: the ranker serves tier none until the first precompute
    os.environ[CONFIG_ENV] = config.to_json()
    if args.workers > 1:  # the workers' metrics, merged by whichever answers /metrics; a fresh set per start
        metrics_dir = settings.data_dir / "serve-metrics"
        shutil.rmtree(metrics_dir, ignore_errors=True)
        metrics_dir.mkdir(parents=True)
        os.environ[MULTIPROCESS_DIR_ENV] = str(metrics_dir)
    uvicorn.run(
        "solaris.serving.app:app_from_env",
        factory=True,
        workers=args.workers,
        host=args.host,
        port=args.port,
        log_level="warning",
        access_log=False,
    )
    return 0
