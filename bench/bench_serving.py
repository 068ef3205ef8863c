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

from __future__ import annotations

import argparse
import csv
import io
import json
import math
import os
import resource
import shutil
import signal
import socket
import sqlite3
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from pathlib import Path

import numpy as np
import psutil
import psycopg
import pyarrow as pa
import pyarrow.dataset as pads
import torch
from bench_store import DIM, HOUR, ITEM_POOL, ITEMS_PER_USER, T0, Pairs, analyze, backend_config, fill, requests
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families

from solaris.enrichment.tiers import TIER_NAMES, served_inputs
from solaris.models.features import IdTable, pair_key
from solaris.models.vm import VerticalModel, VMConfig
from solaris.serving import Ranker
from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.champion import ServingModel
from solaris.serving.metrics import MULTIPROCESS_DIR_ENV, STORE_FAILURES
from solaris.serving.servedlog import served_dir
from solaris.store import FeatureStore, PostgresStoreConfig, SqliteStoreConfig, TierBatchRead, open_store
from solaris.store.codec import decode_exposure, decode_lists, storage_dtype, to_micros
from solaris.store.combine import weighted_mean
from solaris.store.config import parse_store_url
from solaris.tracking.registry import PinnedVersions

AT = T0 + HOUR / 2  # every row written by bench_store.fill is fresh
STORE_TIMEOUT_S = ServiceConfig().store_timeout_ms / 1000
TARGET_MS = {"sqlite": 5.0, "postgresql": 8.0}  # in-process read + score p99 (issue #6)
HTTP_TARGET_MS, HTTP_TARGET_RATIO, RATE, CLIENTS = 15.0, 3.0, 200, 4  # issue #18
SUSTAINED_P99_MS, SUSTAINED_SHARE, SWEEP = 50.0, 0.95, (50, 100, 150, 200, 250, 300, 400, 500, 600)
PER_CLIENT_RATE = 50  # the sweep adds hey processes rather than speed one up: each waits for its answers
FLOOR = "floor (numpy)"
BENCH_VM = "bench"  # the name the bench's VM serves under (its metrics' vm label)
# The default synthetic world's side features and their cardinalities (solaris.data.synthetic).
USER_SIDE = {"u_country": 8, "u_age_bucket": 6, "u_device": 3}
ITEM_SIDE = {"i_category": 20, "i_advertiser": 120, "i_price_bucket": 5}
ENV_STORE, ENV_VERSION, ENV_USERS, ENV_LOG, ENV_THREADS = (
    f"SOLARIS_BENCH_{k}" for k in ("STORE", "VERSION", "USERS", "SERVED_LOG", "TORCH_THREADS")
)


def side_table(n: int, id_column: str, prefix: str, cardinalities: dict[str, int], seed: int) -> IdTable:
    rng = np.random.default_rng(seed)
    columns = {id_column: np.arange(n)} | {name: rng.integers(0, c, n) for name, c in cardinalities.items()}
    return IdTable.from_table(pa.table(columns), id_column, prefix)


def serving_model(version: str, n_users: int, seed: int = 0) -> ServingModel:
    """A SOLARIS VM of the real size with random weights, bound to the store's embedding version."""
    torch.manual_seed(seed)
    config = VMConfig(variant="solaris", code_dim=DIM, embedding_version=version)
    users = side_table(n_users, "user_id", "u_", USER_SIDE, seed)
    items = side_table(ITEM_POOL, "item_id", "i_", ITEM_SIDE, seed + 1)
    vm = VerticalModel(config, users, items).eval()
    return ServingModel(vm, PinnedVersions(fm="1", ae="1", vm="bench", embedding_version=version, vm_name=BENCH_VM))


def fetch(backend: str, raw: str, sql: str) -> list[tuple]:
    if backend == "postgresql":
        with psycopg.connect(raw, options="-csearch_path=bench") as conn:
            return conn.execute(sql).fetchall()
    with closing(sqlite3.connect(raw)) as conn:
        return conn.execute(sql).fetchall()


@dataclass(frozen=True)
class MemoryTiers:
    """The floor: every tier in numpy arrays, pairs found by ``searchsorted`` over sorted pair keys."""

    keys: np.ndarray  # sorted pair_key(user, item)
    vectors: np.ndarray  # row i: the vector of keys[i], as the store returns it (float16 -> float32)
    agg: np.ndarray  # (n_users, dim)
    agg_mask: np.ndarray
    neighbour_ptr: np.ndarray  # user u's neighbours are neighbours[ptr[u]:ptr[u + 1]]
    neighbours: np.ndarray
    similarity: np.ndarray
    item_ptr: np.ndarray  # item i's neighbours are item_neighbours[item_ptr[i]:item_ptr[i + 1]]
    item_neighbours: np.ndarray
    item_similarity: np.ndarray
    user_counts: np.ndarray  # (n_users, windows) exposure counters
    count_keys: np.ndarray  # sorted pair_key(user, item) of the pairs with counters
    pair_counts: np.ndarray  # row i: the counters of count_keys[i]

    @classmethod
    def load(cls, data: Pairs, backend: str, raw: str) -> MemoryTiers:
        """Pairs from the rows written; aggregates and neighbours (drawn inside ``fill``) read back."""
        keys = pair_key(data.users, data.items)
        order = np.argsort(keys)
        n_users = int(data.users.max()) + 1
        agg, agg_mask = np.zeros((n_users, DIM), np.float32), np.zeros(n_users, bool)
        rows = fetch(backend, raw, "SELECT user_id, vector FROM user_aggregates")
        users = np.array([r[0] for r in rows], np.int64)
        blobs = b"".join(bytes(r[1]) for r in rows)  # the store's float16 bytes, decoded as it decodes them
        agg[users], agg_mask[users] = np.frombuffer(blobs, storage_dtype("float16")).reshape(-1, DIM), True
        nb = np.array(fetch(backend, raw, "SELECT user_id, neighbour_id, similarity FROM user_neighbours"), np.float64)
        nb = nb[np.lexsort((nb[:, 1], nb[:, 0]))]
        ptr = np.searchsorted(nb[:, 0], np.arange(n_users + 1))
        lists = sorted(
            (r[0], bytes(r[1])) for r in fetch(backend, raw, "SELECT item_id, neighbours FROM item_neighbours")
        )
        slots = np.array([len(blob) // 8 for _, blob in lists], np.int64)  # packed int32 ids then float32 similarities
        listed, listed_sims = decode_lists(b"".join(blob for _, blob in lists), slots)
        keep = listed >= 0
        inb = np.column_stack([np.repeat([item for item, _ in lists], slots), listed, listed_sims])[keep]
        item_ptr = np.searchsorted(inb[:, 0], np.arange(ITEM_POOL + 1))
        vectors = data.vectors[order].astype(np.float16).astype(np.float32)
        rows = fetch(backend, raw, "SELECT user_id, item_count, counts FROM exposure_counts ORDER BY user_id")
        owners, slots = np.array([r[0] for r in rows], np.int64), np.array([r[1] for r in rows], np.int64)
        counts, items, pair_counts = decode_exposure(b"".join(bytes(r[2]) for r in rows), slots)
        user_counts = np.zeros((n_users, counts.shape[1]), np.float32)
        user_counts[owners] = counts
        count_keys = pair_key(np.repeat(owners, slots), items)
        by_key = np.argsort(count_keys)
        return cls(
            keys[order],
            vectors,
            agg,
            agg_mask,
            ptr,
            nb[:, 1].astype(np.int64),
            nb[:, 2],
            item_ptr,
            inb[:, 1].astype(np.int64),
            inb[:, 2],
            user_counts,
            count_keys[by_key],
            pair_counts[by_key],
        )

    def _pairs(self, users: np.ndarray, items: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
        keys = pair_key(users, items)
        at = np.minimum(np.searchsorted(self.keys, keys), len(self.keys) - 1)
        found = self.keys[at] == keys
        return np.where(found[:, None], self.vectors[at], 0), found

    def gather(self, user: int, items: np.ndarray) -> TierBatchRead:
        n = len(items)
        pair, pair_mask = self._pairs(np.full(n, user), items)
        span = slice(self.neighbour_ptr[user], self.neighbour_ptr[user + 1])
        neighbours, similarity = self.neighbours[span], self.similarity[span]
        vectors, found = self._pairs(np.repeat(neighbours, n), np.tile(items, len(neighbours)))
        at = np.tile(np.arange(n), len(neighbours))[found]
        knn, knn_mask = weighted_mean(at, np.repeat(similarity, n)[found], vectors[found], n)
        agg, agg_mask = np.repeat(self.agg[user][None], n, axis=0), np.full(n, self.agg_mask[user])
        starts, counts = self.item_ptr[items], self.item_ptr[items + 1] - self.item_ptr[items]
        row = np.repeat(np.arange(n), counts)  # each candidate's neighbour-list entries, flattened
        entry = np.arange(counts.sum()) + np.repeat(starts - (np.cumsum(counts) - counts), counts)
        vectors, found = self._pairs(np.full(len(entry), user), self.item_neighbours[entry])
        a2a, a2a_mask = weighted_mean(row[found], self.item_similarity[entry][found], vectors[found], n)
        keys = pair_key(np.full(n, user), items)
        at = np.minimum(np.searchsorted(self.count_keys, keys), len(self.count_keys) - 1)
        pair_counts = np.where((self.count_keys[at] == keys)[:, None], self.pair_counts[at], 0)
        exposure = np.concatenate([np.repeat(self.user_counts[user][None], n, axis=0), pair_counts], axis=1)
        no_cohort = np.zeros(n, bool)  # every bench user has counters: the cohort tier never feeds
        return TierBatchRead(pair, pair_mask, agg, agg_mask, knn, knn_mask, a2a, a2a_mask, exposure, no_cohort)


Timed = Callable[[int, np.ndarray], tuple[float, float, float, bool]]  # total, read, model seconds; failed


def timed_rank(ranker: Ranker) -> Timed:
    def call(user: int, items: np.ndarray) -> tuple[float, float, float, bool]:
        started = time.perf_counter()
        served = ranker.rank(user, items, AT)
        total = time.perf_counter() - started
        return total, served.read_seconds, served.score_seconds, served.store_failure is not None

    return call


def floor_inputs(floor: MemoryTiers, model: ServingModel, user: int, items: np.ndarray) -> tuple[np.ndarray, float]:
    """The VM inputs as the floor builds them, and its gather seconds."""
    started = time.perf_counter()
    read = floor.gather(user, items)
    gathered = time.perf_counter() - started
    n = len(items)
    users, ts, positions = np.full(n, user, np.int64), np.full(n, to_micros(AT, "t"), np.int64), np.zeros(n, np.int64)
    return served_inputs(model.vm, model.pinned.embedding_version, users, items, ts, positions, read), gathered


def timed_floor(floor: MemoryTiers, model: ServingModel) -> Timed:
    def call(user: int, items: np.ndarray) -> tuple[float, float, float, bool]:
        started = time.perf_counter()
        inputs, gathered = floor_inputs(floor, model, user, items)
        with torch.inference_mode():
            model.vm(torch.from_numpy(inputs)).numpy()
        total = time.perf_counter() - started
        return total, gathered, total - gathered, False

    return call


def check_floor(ranker: Ranker, floor: MemoryTiers, model: ServingModel, reqs: list[tuple[int, np.ndarray]]) -> None:
    """The floor must do the ranker's work: the same VM inputs, request by request."""
    for user, items in reqs:
        served = ranker.rank(user, items, AT)
        if served.store_failure is not None:
            raise RuntimeError(f"store read failed ({served.store_failure}) while checking the floor")
        inputs, _ = floor_inputs(floor, model, user, items)
        np.testing.assert_allclose(inputs, served.inputs, rtol=1e-5, atol=1e-6, err_msg=f"floor != ranker, user {user}")


@dataclass(frozen=True)
class Split:
    total: np.ndarray  # ms
    read: np.ndarray
    model: np.ndarray
    failures: int


def take_turns(calls: dict[str, Timed], reqs: list[tuple[int, np.ndarray]]) -> dict[str, Split]:
    """Each call's latencies on the same requests, the calls rotating who goes first (bench_store's
    ``paired_latencies_ms`` times whole calls only; this keeps each call's read/model split)."""
    names = list(calls)
    for user, items in reqs[:50]:  # warm caches, prepared statements, the read pool's threads
        for name in names:
            calls[name](user, items)
    times: dict[str, list[tuple[float, float, float, bool]]] = {name: [] for name in names}
    for k, (user, items) in enumerate(reqs):
        for name in names[k % len(names) :] + names[: k % len(names)]:
            times[name].append(calls[name](user, items))
    out = {}
    for name, rows in times.items():
        total, read, model, failed = (np.array(column) for column in zip(*rows, strict=True))
        out[name] = Split(total * 1e3, read * 1e3, model * 1e3, int(failed.sum()))
    return out


def in_process(
    store: FeatureStore, reqs: list[tuple[int, np.ndarray]], floor: MemoryTiers, model: ServingModel
) -> dict[str, Split]:
    direct, pooled = Ranker(store, model), Ranker(store, model, store_timeout_s=STORE_TIMEOUT_S)
    try:
        check_floor(direct, floor, model, reqs[:20])
        calls = {
            "ranker": timed_rank(direct),
            f"ranker, {STORE_TIMEOUT_S * 1e3:.0f} ms timeout": timed_rank(pooled),
            FLOOR: timed_floor(floor, model),
        }
        return take_turns(calls, reqs)
    finally:
        direct.close()
        pooled.close()


# -- HTTP ------------------------------------------------------------------------------------------------


def http_app() -> FastAPI:
    """The service as ``solaris serve`` builds it (served log on, the default store timeout), with the
    bench's VM in place of the registry's champion; uvicorn's ``--factory`` calls it in the server process."""
    config = ServiceConfig(served_log_dir=Path(os.environ[ENV_LOG]), torch_threads=int(os.environ[ENV_THREADS]))
    store = open_store(parse_store_url(os.environ[ENV_STORE]))
    model = serving_model(os.environ[ENV_VERSION], int(os.environ[ENV_USERS]))
    return create_app(build_service(store, {model.pinned.vm_name: model}, config), config)


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def get(url: str) -> tuple[int, str]:
    with urllib.request.urlopen(url, timeout=5) as response:
        return response.status, response.read().decode()


@contextmanager
def http_server(store_url: str, version: str, n_users: int, served_log: Path, workers: int) -> Iterator[Server]:
    """uvicorn with ``solaris serve``'s settings in a child process, once /readyz answers. With several
    workers their metrics are merged as ``solaris serve --workers`` merges them."""
    port = free_port()
    metrics_dir = served_log.parent / "serve-metrics"
    metrics_dir.mkdir(parents=True, exist_ok=True)
    multiprocess = {MULTIPROCESS_DIR_ENV: str(metrics_dir)} if workers > 1 else {}
    env = (
        os.environ
        | multiprocess
        | {
            ENV_STORE: store_url,
            ENV_VERSION: version,
            ENV_USERS: str(n_users),
            ENV_LOG: str(served_log),
            ENV_THREADS: str(torch.get_num_threads()),
        }
    )
    command = [
        sys.executable,
        "-m",
        "uvicorn",
        "--factory",
        "bench_serving:http_app",
        "--app-dir",
        str(Path(__file__).parent),
        "--host",
        "127.0.0.1",
        "--port",
        str(port),
        "--log-level",
        "warning",
        "--no-access-log",
        "--workers",
        str(workers),
    ]
    server = subprocess.Popen(command, env=env)
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + 120
        while True:
            if server.poll() is not None:
                raise RuntimeError(f"the ranker service exited with {server.returncode} before it was ready")
            try:
                if get(f"{base}/readyz")[0] == 200:
                    break
            except OSError:
                if time.monotonic() > deadline:
                    raise
            time.sleep(0.5)
        yield Server(base, server.pid)
    finally:
        server.send_signal(signal.SIGTERM)  # uvicorn's graceful shutdown: the lifespan flushes the served log
        try:
            server.wait(timeout=60)
        except subprocess.TimeoutExpired:
            server.kill()
            server.wait()


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


Counters = dict[tuple[str, frozenset[tuple[str, str]]], float]


def scrape(base: str) -> Counters:
    """The service's counters, by name and labels (the exposition's label order is not the declared one)."""
    _, text = get(f"{base}/metrics")
    return {
        (sample.name, frozenset(sample.labels.items())): sample.value
        for family in text_string_to_metric_families(text)
        for sample in family.samples
        if sample.name.endswith("_total")
    }


def counter(counters: Counters, name: str, **labels: str) -> float:
    return counters.get((name, frozenset(labels.items())), 0.0)


@dataclass(frozen=True)
class Server:
    base: str  # URL
    pid: int  # uvicorn's supervisor: its children are the workers, theirs the served-log writers

    def cpu_seconds(self) -> dict[str, float]:
        """CPU so far of the workers and of the served-log writers (uvicorn's supervisor and multiprocessing's
        resource tracker idle)."""
        out = {"workers": 0.0, "served-log writers": 0.0}
        for worker in psutil.Process(self.pid).children():
            if "resource_tracker" in " ".join(worker.cmdline()):
                continue
            for process, kind in ((worker, "workers"), *((w, "served-log writers") for w in worker.children())):
                times = process.cpu_times()
                out[kind] += times.user + times.system
        return out


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


def store_url(config: SqliteStoreConfig | PostgresStoreConfig) -> str:
    """The store's URL as ``solaris serve`` takes it (``--store-url``; the schema as a query parameter)."""
    if isinstance(config, SqliteStoreConfig):
        return config.url
    return config.url + ("" if config.schema is None else f"?schema={config.schema}")


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


# -- the run ---------------------------------------------------------------------------------------------


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


def ms(values: np.ndarray, q: float) -> str:
    return f"{np.percentile(values, q):>7.2f}"


def verdict(p99: float, limit: float, errors: int = 0) -> str:
    return f"{'ok' if p99 <= limit and not errors else 'MISS'} <={limit:g}"


def print_in_process(results: dict[str, dict[str, dict[str, Split]]], rows: int, n_requests: int) -> None:
    print(
        f"\nin process: 1 user x {ITEMS_PER_USER} candidates, {rows:,} pair rows, {n_requests} requests, "
        f"{torch.get_num_threads()} torch threads (ms; total = read + model + bookkeeping)"
    )
    print(
        f"{'backend':<11} {'statistics':<10} {'path':<24} {'total p50':>9} {'total p99':>9} {'read p50':>8} "
        f"{'read p99':>8} {'model p50':>9} {'model p99':>9} {'p99/floor':>9} {'failed':>6} "
        f"{'target':>9}"
    )
    for backend, states in results.items():
        for stats, splits in states.items():
            floor = np.percentile(splits[FLOOR].total, 99)
            for name, s in splits.items():
                p99 = np.percentile(s.total, 99)
                target = "" if name == FLOOR else verdict(p99, TARGET_MS[backend])
                print(
                    f"{backend:<11} {stats:<10} {name:<24} {ms(s.total, 50):>9} {ms(s.total, 99):>9} "
                    f"{ms(s.read, 50):>8} {ms(s.read, 99):>8} {ms(s.model, 50):>9} {ms(s.model, 99):>9} "
                    f"{p99 / floor:>8.1f}x {s.failures:>6} {target:>9}"
                )


def print_http(http: HttpResult, duration: float, workers: int) -> None:
    print(
        f"\nHTTP ({http.backend}, served log on, {workers} worker(s), {torch.get_num_threads()} torch thread(s)): "
        f"{RATE} requests/s for {duration:g} s from {CLIENTS} hey processes x {RATE / CLIENTS:g}/s, one body each, "
        f"{ITEMS_PER_USER} candidates per /rank; bursts: the processes in phase, {CLIENTS} requests at once every "
        f"{CLIENTS / RATE * 1e3:g} ms; spread: one request every {1e3 / RATE:g} ms (ms)"
    )
    print(
        f"{'pattern':<8} {'endpoint':<10} {'offered':>8} {'answered':>8} {'rate/s':>7} {'p50':>7} {'p99':>7} "
        f"{'max':>7} {'errors':>6} {'p99/floor':>9}  target (0 errors)"
    )
    for pattern, measured in http.at_rate.items():
        floor = np.percentile(measured.floor.latencies, 99)
        for name, load in (("/healthz", measured.floor), ("/rank", measured.rank)):
            p99 = np.percentile(load.latencies, 99)
            print(
                f"{pattern:<8} {name:<10} {load.offered:>8} {len(load.latencies):>8} {load.achieved:>7.1f} "
                f"{ms(load.latencies, 50)} {ms(load.latencies, 99)} {load.latencies.max():>7.2f} {load.errors:>6} "
                f"{p99 / floor:>8.1f}x  {measured.verdict() if load is measured.rank else ''}"
            )
    for pattern, measured in http.at_rate.items():
        per_request = measured.cpu.per_request_ms
        cpu = ", ".join(f"{kind} {value:.2f}" for kind, value in per_request.items())
        print(
            f"CPU per answered /rank ({pattern}, ms): {cpu}; {sum(per_request.values()):.2f} in all, "
            f"{RATE}/s would need {sum(per_request.values()) * RATE / 1e3:.2f} cores; the machine was busy "
            f"{measured.cpu.busy_cores:.2f} of {psutil.cpu_count()} cores"
        )
    seq, c = http.sequential, http.counters
    print(
        f"/rank, one client back to back (service time, no queueing): p50 {ms(seq.latencies, 50).strip()}, "
        f"p99 {ms(seq.latencies, 99).strip()}, {seq.errors} errors"
    )
    failures = ", ".join(
        f"{k} {counter(c, 'solaris_store_failures_total', vm=BENCH_VM, kind=k):.0f}" for k in STORE_FAILURES
    )
    tiers = {t: counter(c, "solaris_rank_candidates_total", vm=BENCH_VM, tier=t) for t in TIER_NAMES}
    shares = ", ".join(f"{t} {v / max(sum(tiers.values()), 1):.0%}" for t, v in tiers.items())
    dropped = counter(c, "solaris_served_log_dropped_rows_total")
    print(
        f"during /rank at {RATE}/s: store failures (served as tier none) {failures}; tiers {shares}; "
        f"served log: {http.logged_rows:,} rows written in all, {dropped:.0f} dropped"
    )
    print(
        f"sweep (/rank, spread, {PER_CLIENT_RATE}/s per hey process; sustained: 0 errors, >= {SUSTAINED_SHARE:.0%} of the "
        f"offered rate, p99 <= {SUSTAINED_P99_MS:g} ms):"
    )
    for load in http.sweep:
        print(
            f"  offered {load.rate:>4.0f}/s: achieved {load.achieved:6.1f}/s, p50 {ms(load.latencies, 50)}, "
            f"p99 {ms(load.latencies, 99)}, {load.errors} errors: {'sustained' if load.sustained() else 'not sustained'}"
        )
    best = http.highest_sustained()
    print(
        f"highest rate sustained ({http.backend}): {'none of the sweep' if best is None else f'{best:.0f} requests/s'}"
    )


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
    if args.workers < 1:
        parser.error("--workers must be at least 1")
    rows = args.rows or (100_000 if args.quick else 1_000_000)
    n_requests = args.requests or (300 if args.quick else 1000)
    duration = args.duration if args.duration is not None else (5.0 if args.quick else 30.0)
    if rows < ITEMS_PER_USER or n_requests < 1 or duration < 0:
        parser.error(f"--rows must be >= {ITEMS_PER_USER}, --requests >= 1 and --duration >= 0")
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with_http = duration > 0
    if with_http and shutil.which("hey") is None:
        print(
            "hey is not installed, so the HTTP part is skipped: `make bench-setup` installs it (the Debian "
            "package `hey`), or pass --duration 0 to skip it on purpose",
            flush=True,
        )
        with_http = False
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
