"""bench_serving's HTTP load: ``hey`` processes at a fixed rate against /rank and /healthz of the same server,
the CPU each kind of process spends per request, and a sweep of rates for the highest one sustained."""

from __future__ import annotations

import csv
import io
import json
import math
import resource
import subprocess
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import pyarrow.dataset as pads
from bench_store import ITEM_POOL, ITEMS_PER_USER, Pairs, requests
from serving_server import Counters, Server, http_server, scrape
from serving_world import AT, BENCH_VM

from solaris.serving.servedlog import served_dir

HTTP_TARGET_MS, HTTP_TARGET_RATIO, RATE, CLIENTS = 15.0, 3.0, 200, 4  # issue #18
SUSTAINED_P99_MS, SUSTAINED_SHARE, SWEEP = 50.0, 0.95, (50, 100, 150, 200, 250, 300, 400, 500, 600)
PER_CLIENT_RATE = 50  # the sweep adds hey processes rather than speed one up: each waits for its answers


def bodies(data: Pairs, n: int, workdir: Path) -> list[Path]:
    """``n`` request bodies of 200 distinct candidates each (the API refuses duplicates): bench_store's
    requests, topped up from the pool where an item repeats."""
    rng = np.random.default_rng(3)
    paths = []
    for k, (user, items) in enumerate(requests(data, n, seed=5)):
        pool = np.concatenate([items, rng.permutation(ITEM_POOL)])
        distinct = pool[np.sort(np.unique(pool, return_index=True)[1])][:ITEMS_PER_USER]
        body = {"user_id": user, "items": distinct.tolist(), "request_id": k, "at": AT.isoformat()}
        paths.append(workdir / f"body-{k}.json")
        paths[-1].write_text(json.dumps(body))
    return paths


@dataclass(frozen=True)
class Load:
    latencies: np.ndarray  # ms, answered requests
    offered: int
    not_ok: int  # answered with a status other than 200
    seconds: float
    rate: float  # offered requests/s (nan: back to back)
    hey_cpu_s: float  # CPU the hey processes spent

    @property
    def errors(self) -> int:
        """Non-200 answers plus requests with no answer (hey's CSV lists only answered requests)."""
        return self.not_ok + self.offered - len(self.latencies)

    @property
    def achieved(self) -> float:
        return len(self.latencies) / self.seconds

    def sustained(self) -> bool:
        """Every request answered 200, the offered rate kept (hey waits for each answer, so a slow service
        lowers the rate it is offered), p99 within the bound."""
        return (
            not self.errors
            and self.achieved >= SUSTAINED_SHARE * self.rate
            and float(np.percentile(self.latencies, 99)) <= SUSTAINED_P99_MS
        )


def hey(
    url: str,
    per_client: int,
    bodies: Sequence[Path] | None,
    clients: int = CLIENTS,
    rate: float | None = RATE,
    spread: bool = False,
) -> Load:
    """``clients`` hey processes (body k for process k), ``per_client`` requests each at ``rate / clients``
    requests/s (``None``: back to back). Started together, their tickers run in phase, as one hey's
    ``-c`` workers do: ``clients`` requests arrive at once every ``clients / rate`` seconds. ``spread``
    starts process k ``k / rate`` seconds after the first, so one request arrives every ``1 / rate`` seconds.

    One connection per request: a kept-alive connection stays with the worker that accepted it, and uvicorn's
    workers accept from one socket, so hey's 4 connections often all landed on one worker (3 trials: 4+0,
    4+0, 3+1), making a 2-worker run a 1-worker one. A new connection goes to a free worker, as a load
    balancer in front of the workers would send it; the connection's cost is in every figure, floor included."""
    started, children_before = time.perf_counter(), resource.getrusage(resource.RUSAGE_CHILDREN)
    processes = []
    for k in range(clients):
        if spread and rate:
            time.sleep(max(started + k / rate - time.perf_counter(), 0.0))
        command = ["hey", "-n", str(per_client), "-c", "1", "-o", "csv", "-disable-keepalive"]
        command += [] if rate is None else ["-q", f"{rate / clients:g}"]
        command += [] if bodies is None else ["-m", "POST", "-T", "application/json", "-D", str(bodies[k])]
        processes.append(subprocess.Popen([*command, url], stdout=subprocess.PIPE, text=True))
    outputs = [p.communicate()[0] for p in processes]
    seconds = time.perf_counter() - started
    children = resource.getrusage(resource.RUSAGE_CHILDREN)  # the hey processes, once waited for
    hey_cpu = children.ru_utime + children.ru_stime - children_before.ru_utime - children_before.ru_stime
    rows = [row for out in outputs for row in csv.DictReader(io.StringIO(out))]
    latencies = np.array([float(r["response-time"]) * 1e3 for r in rows])
    not_ok = sum(r["status-code"] != "200" for r in rows)
    return Load(latencies, per_client * clients, not_ok, seconds, rate or math.nan, hey_cpu)


@dataclass(frozen=True)
class CpuUse:
    """Where the CPU went while a load ran, in ms per answered request, and how busy the machine was."""

    per_request_ms: dict[str, float]
    busy_cores: float


def postgres_cpu_seconds() -> float:
    """CPU so far of the PostgreSQL server's processes on this machine (its backends serve the workers' reads)."""
    total = 0.0
    for process in psutil.process_iter(["name", "cpu_times"]):
        if process.info["name"] == "postgres" and process.info["cpu_times"] is not None:
            total += process.info["cpu_times"].user + process.info["cpu_times"].system
    return total


def with_cpu(server: Server, run: Callable[[], Load]) -> tuple[Load, CpuUse]:
    """``run``'s load, and the CPU of every process that served it, PostgreSQL's included (idle for SQLite)."""

    def cpu_seconds() -> dict[str, float]:
        return server.cpu_seconds() | {"postgres": postgres_cpu_seconds()}

    before, machine = cpu_seconds(), psutil.cpu_times()
    load = run()
    after, machine_after = cpu_seconds(), psutil.cpu_times()
    idle = machine_after.idle + machine_after.iowait - machine.idle - machine.iowait
    busy = (sum(machine_after) - sum(machine) - idle) / load.seconds
    answered = max(len(load.latencies), 1)
    per_request = {kind: (after[kind] - before[kind]) * 1e3 / answered for kind in after}
    return load, CpuUse(per_request | {"hey": load.hey_cpu_s * 1e3 / answered}, busy)


@dataclass(frozen=True)
class AtRate:
    """/healthz (the floor), then /rank, at ``RATE`` in one arrival pattern."""

    floor: Load
    rank: Load
    cpu: CpuUse  # during ``rank``

    def verdict(self) -> str:
        p99, floor = (float(np.percentile(load.latencies, 99)) for load in (self.rank, self.floor))
        met = p99 <= HTTP_TARGET_MS and p99 / floor <= HTTP_TARGET_RATIO and not self.rank.errors
        return f"{'ok' if met else 'MISS'} <={HTTP_TARGET_MS:g} ms and <={HTTP_TARGET_RATIO:g}x"


PATTERNS = {"bursts": False, "spread": True}  # name: hey's ``spread``


@dataclass(frozen=True)
class HttpResult:
    backend: str
    at_rate: dict[str, AtRate]  # by PATTERNS
    sequential: Load  # /rank, one client back to back: the service time without queueing
    counters: Counters  # during the /rank loads at RATE
    logged_rows: int
    sweep: list[Load]  # /rank at each rate of SWEEP, spread, up to the first not sustained

    def highest_sustained(self) -> float | None:
        rates = [load.rate for load in self.sweep if load.sustained()]
        return max(rates) if rates else None


def sweep(base: str, workdir: Path, data: Pairs, seconds: float) -> list[Load]:
    """/rank at rising rates, ``PER_CLIENT_RATE`` per hey process, until one is not sustained."""
    loads = []
    for rate in SWEEP:
        clients = max(CLIENTS, math.ceil(rate / PER_CLIENT_RATE))
        paths = bodies(data, clients, workdir)
        loads.append(hey(f"{base}/rank", max(int(rate * seconds) // clients, 1), paths, clients, rate, spread=True))
        if not loads[-1].sustained():
            break
    return loads


def bench_http(
    backend: str, url: str, version: str, data: Pairs, duration: float, workdir: Path, workers: int
) -> HttpResult:
    per_client = int(RATE * duration) // CLIENTS
    served_log = workdir / f"served-{backend}"
    paths = bodies(data, CLIENTS, workdir)
    with http_server(url, version, int(data.users.max()) + 1, served_log, workers) as server:
        base = server.base
        hey(f"{base}/rank", 25, paths)  # warm-up
        at_rate, counters = {}, {}
        for pattern, spread in PATTERNS.items():
            floor = hey(f"{base}/healthz", per_client, None, spread=spread)
            before = scrape(base)
            rank, cpu = with_cpu(server, lambda spread=spread: hey(f"{base}/rank", per_client, paths, spread=spread))
            counters = {k: counters.get(k, 0.0) + v - before.get(k, 0.0) for k, v in scrape(base).items()}
            at_rate[pattern] = AtRate(floor, rank, cpu)
        sequential = hey(f"{base}/rank", 500, paths, clients=1, rate=None)
        rates = sweep(base, workdir, data, max(duration / 3, 2.0))
    logged = pads.dataset(served_dir(served_log, BENCH_VM), format="parquet", partitioning="hive").count_rows()
    return HttpResult(backend, at_rate, sequential, counters, logged, rates)
