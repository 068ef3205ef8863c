"""Health of the stack's services (over HTTP, or a Celery worker's ping over the broker), and whether a port is
free before a service claims it."""

from __future__ import annotations

import json
import os
import socket
import time
import urllib.error
import urllib.request
from dataclasses import dataclass

HEARTBEAT_SCHEME = "file://"
HEARTBEAT_S = 10.0  # a heartbeat older than this: the process is alive but stuck


@dataclass(frozen=True)
class Check:
    """A URL that answers 200 when the service is up; for Airflow, also the component that must be healthy.

    Airflow's ``/api/v2/monitor/health`` answers 200 while a component is down: the scheduler, triggerer and
    dag-processor each count as healthy only when their heartbeat in the metadata DB is recent.

    A Celery worker has no URL of its own: its check is the broker's URL (without a password) and the node
    name that must answer there with ``queues``. A process that serves nothing (live traffic) is checked by a
    heartbeat file it touches each time it looks at the clock: ``file://<path>``, fresh within ``HEARTBEAT_S``.
    """

    url: str
    component: str | None = None
    celery_node: str | None = None
    queues: tuple[str, ...] = ()

    def passes(self, body: bytes) -> bool:
        if self.component is None:
            return True
        try:
            return json.loads(body)[self.component]["status"] == "healthy"
        except (ValueError, KeyError, TypeError):
            return False


def probe(check: Check, timeout_s: float = 2.0) -> bool:
    """One request: True when the answer is 200 and its body passes the check (for a worker: it answers
    and consumes its queues)."""
    if check.url.startswith(HEARTBEAT_SCHEME):
        try:
            return time.time() - os.stat(check.url.removeprefix(HEARTBEAT_SCHEME)).st_mtime <= HEARTBEAT_S
        except OSError:
            return False
    if check.celery_node is not None:
        from solaris.ops import celery_workers

        queues = celery_workers.consumed_queues(celery_workers.broker_url(check.url), check.celery_node, timeout_s)
        return queues is not None and set(check.queues) <= set(queues)
    try:
        with urllib.request.urlopen(check.url, timeout=timeout_s) as answer:  # noqa: S310 (our own URLs)
            return answer.status == 200 and check.passes(answer.read())
    except (urllib.error.URLError, OSError, ValueError):
        return False


def port_free(host: str, port: int) -> bool:
    """Whether a server could listen on ``host:port`` now; SO_REUSEADDR as uvicorn sets it, so a port left in
    TIME_WAIT by a stopped stack counts as free and only a live listener makes it taken."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as sock:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        try:
            sock.bind((host, port))
        except OSError:
            return False
    return True


def free_ports(host: str, count: int) -> list[int]:
    """``count`` distinct ports the kernel considers free now (a later bind can still race another process)."""
    sockets = [socket.socket(socket.AF_INET, socket.SOCK_STREAM) for _ in range(count)]
    try:
        for sock in sockets:
            sock.bind((host, 0))
        return [sock.getsockname()[1] for sock in sockets]
    finally:
        for sock in sockets:
            sock.close()
