"""Ranker latency, in process and over HTTP, each against a floor measured in the same run.

- in process: ``Ranker.rank`` for 1 user x 200 candidates on bench_store's layout (1M pair rows, user
  aggregates, 10 neighbours per user, 20 per item), split into store read and model time (``Served.read_seconds`` /
  ``score_seconds``), against the floor: the same four tiers gathered from numpy arrays (sorted pair keys,
  no SQL, no decoding) and the same input build and VM forward pass. The ranker without a timeout, the
  ranker with the service's timeout (the read on a thread pool) and the floor take turns on the same
  requests; the floor is checked to produce the ranker's exact inputs first. SQLite and PostgreSQL, each as
  written and after ANALYZE. The VM is the SOLARIS variant at VMConfig's default size, random weights.
- HTTP, on each backend: the FastAPI service as ``solaris serve`` runs it (uvicorn, the service's store
  timeout, features as served logged to Parquet), driven by ``hey`` at a fixed rate: 4 hey processes x 50
  requests/s, each with its own body (hey sends one body per process), a fixed request count so every
  offered request is accounted for; the floor is the same load on ``/healthz`` of the same server. The CPU
  each kind of process spent per request at that rate (server workers, their served-log writers, hey) and
  how busy the machine was say what the tail is made of. Then a sweep of rates finds the highest one the
  service sustains: every offered request answered 200, at least 95% of the offered rate achieved, p99
  within 50 ms.
"""

# This benchmark's parts are serving_*.py beside it (world, in_process, server, load, report), not bench_*.py:
# run_all.py runs every bench_*.py as a benchmark.

from __future__ import annotations

import argparse
import shutil
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import torch
from bench_store import ITEMS_PER_USER, Pairs, analyze, backend_config, fill, requests
from serving_in_process import MemoryTiers, Split, in_process
from serving_load import HttpResult, bench_http
from serving_report import print_http, print_in_process
from serving_server import store_url
from serving_world import serving_model
from threadpoolctl import threadpool_limits

from solaris.serving.app import ServiceConfig
from solaris.store import open_store


def bench_backend(
    backend: str, data: Pairs, n_requests: int, duration: float | None, workdir: Path, workers: int
) -> tuple[dict[str, dict[str, Split]], HttpResult | None]:
    """In-process splits per planner-statistics state; HTTP on the analyzed store when ``duration``."""
    reqs = requests(data, n_requests)
    splits: dict[str, dict[str, Split]] = {}
    with backend_config(backend, workdir, f"serving-{backend}") as (config, raw):
        with open_store(config, init=True) as store:
            version, _ = fill(store, data)
            model = serving_model(version, int(data.users.max()) + 1)
            floor = MemoryTiers.load(data, backend, raw)
            splits["as written"] = in_process(store, reqs, floor, model)
            analyze(backend, raw)
            splits["analyzed"] = in_process(store, reqs, floor, model)
        http = None
        if duration is not None:
            http = bench_http(backend, store_url(config), version, data, duration, workdir, workers)
    return splits, http


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k pair rows, 300 requests, 5 s of HTTP load")
    parser.add_argument("--rows", type=int, help="pair rows in the store (default 1,000,000)")
    parser.add_argument("--requests", type=int, help="in-process requests per path (default 1000)")
    parser.add_argument("--duration", type=float, help="seconds of HTTP load per endpoint (default 30; 0: no HTTP)")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    parser.add_argument(
        "--workers", type=int, default=2, help="uvicorn worker processes for the HTTP part (default 2: one per core)"
    )
    parser.add_argument(
        "--torch-threads",
        type=int,
        default=ServiceConfig().torch_threads,
        help="torch threads, here and in the server (default: the service's)",
    )
    args = parser.parse_args(argv)
    torch.set_num_threads(args.torch_threads)
    threadpool_limits(args.torch_threads, user_api="blas")  # as the service holds numpy's BLAS (build_service)
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    n_requests = args.requests or (300 if args.quick else 1000)
    duration = args.duration if args.duration is not None else (5.0 if args.quick else 30.0)
    if rows < ITEMS_PER_USER or n_requests < 1 or duration < 0:
        parser.error(f"--rows must be >= {ITEMS_PER_USER}, --requests >= 1 and --duration >= 0")
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with_http = duration > 0
    if with_http and shutil.which("hey") is None:  # asked for, so not skipped quietly
        parser.error(
            "the HTTP part needs hey, which is not installed: `make bench-setup` installs it (the Debian package"
            " `hey`), or pass --duration 0 to measure in process only"
        )
    data = Pairs.make(rows)
    results, https = {}, []
    with tempfile.TemporaryDirectory() as tmp:
        for backend in backends:
            print(f"{backend}: filling {len(data.users):,} pair rows and measuring ...", flush=True)
            http_duration = duration if with_http else None
            results[backend], http = bench_backend(backend, data, n_requests, http_duration, Path(tmp), args.workers)
            https += [http] if http is not None else []
    print_in_process(results, len(data.users), n_requests)
    for http in https:
        print_http(http, duration, args.workers)
    return 0


if __name__ == "__main__":
    sys.exit(main())
