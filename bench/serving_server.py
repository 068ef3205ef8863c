"""bench_serving's service under test: the FastAPI app as ``solaris serve`` runs it, with the bench's VM, in a
uvicorn child process; the CPU its processes spend and the counters it exposes."""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path

import psutil
import torch
from fastapi import FastAPI
from prometheus_client.parser import text_string_to_metric_families
from serving_world import serving_model

from solaris.serving.app import ServiceConfig, build_service, create_app
from solaris.serving.metrics import MULTIPROCESS_DIR_ENV
from solaris.store import PostgresStoreConfig, SqliteStoreConfig, open_store
from solaris.store.config import parse_store_url

ENV_STORE, ENV_VERSION, ENV_USERS, ENV_LOG, ENV_THREADS = (
    f"SOLARIS_BENCH_{k}" for k in ("STORE", "VERSION", "USERS", "SERVED_LOG", "TORCH_THREADS")
)


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
        "serving_server:http_app",
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


def store_url(config: SqliteStoreConfig | PostgresStoreConfig) -> str:
    """The store's URL as ``solaris serve`` takes it (``--store-url``; the schema as a query parameter)."""
    if isinstance(config, SqliteStoreConfig):
        return config.url
    return config.url + ("" if config.schema is None else f"?schema={config.schema}")
