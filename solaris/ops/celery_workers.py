"""The Celery side of the local stack: which workers consume which queues, the broker, and asking a worker
whether it answers (Celery's own ping and ``active_queues``, the calls ``airflow celery list-workers`` makes).

Queues follow the DAGs: every task runs on Airflow's ``default`` queue except the FM's embedding shards,
which the precompute pipeline routes to ``gpu`` (``solaris.precompute.pipeline``); the ``gpu`` worker runs
one task at a time, as the ``gpu`` pool does.
"""

from __future__ import annotations

import os
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit, urlunsplit

from solaris.airflow_env import GPU_POOL

DEFAULT_BROKER_URL = "redis://127.0.0.1:6379/0"
BROKER_PASSWORD_ENV = "REDIS_PASSWORD"  # compose's name for it too; never written to the stack's state file
WORKER_NAME_ENV = "SOLARIS_CELERY_WORKER"


@dataclass(frozen=True)
class WorkerSpec:
    name: str
    queues: tuple[str, ...]
    concurrency: int
    # False: its tasks reach only the staging location and MLflow's server, as on a GPU host that shares no
    # disk with the others; the local stack gives such a worker an empty data folder of its own, so a task
    # that read the event log or the code log there would fail instead of passing by a shared disk.
    local_data: bool = True

    def node(self, host: str | None = None) -> str:
        """Celery's node name for this worker (``--celery-hostname``), unique per stack host."""
        return f"{self.name}@{host or socket.gethostname()}"


WORKERS = (
    WorkerSpec("default", ("default",), concurrency=2),  # 2 cores: one task per core
    WorkerSpec(GPU_POOL, (GPU_POOL,), concurrency=1, local_data=False),
)


def broker_url(url: str = DEFAULT_BROKER_URL) -> str:
    """The broker URL with the password from ``$REDIS_PASSWORD`` where set; an unknown scheme is refused."""
    parts = urlsplit(url)
    if parts.scheme not in ("redis", "rediss"):
        raise ValueError(f"Celery broker URL {url!r}: expected redis://<host>:<port>/<db>")
    if parts.password:
        raise ValueError(
            f"Celery broker URL: put its password in ${BROKER_PASSWORD_ENV}, not in the URL (which the stack's "
            "state file and status show)"
        )
    password = os.environ.get(BROKER_PASSWORD_ENV)
    if not password:
        return url
    return urlunsplit(parts._replace(netloc=f":{password}@{parts.hostname}:{parts.port or 6379}"))


def check_broker(url: str, timeout_s: float = 3.0) -> None:
    """Refuse a broker that does not answer now, instead of workers that retry it silently; the message
    carries no URL, since ``url`` may hold the password."""
    from kombu import Connection

    with Connection(url, connect_timeout=timeout_s) as connection:
        try:
            connection.ensure_connection(max_retries=1, timeout=timeout_s)
        except Exception as exc:  # kombu re-raises the transport's own error types
            raise ValueError(f"does not answer: {exc}") from None


def result_backend(metadata_url: str) -> str:
    """Celery's task results in Airflow's own PostgreSQL metadata DB, as compose has them."""
    if not metadata_url.startswith("postgresql+psycopg://"):
        raise ValueError(
            "the Celery executor needs PostgreSQL as Airflow's metadata DB (its workers and scheduler share it); "
            f"got {metadata_url.split('://', 1)[0]}://… (drop --sqlite, or pass a postgresql+psycopg:// --metadata-url)"
        )
    return f"db+{metadata_url}"


def consumed_queues(url: str, node: str, timeout_s: float = 2.0) -> list[str] | None:
    """The queues worker ``node`` consumes, asked on the broker at ``url``; None when it does not answer.

    Addressed to that node, so the broadcast returns on its reply instead of waiting out ``timeout_s``.
    """
    from celery import Celery

    app = Celery(broker=url)
    try:
        answers = app.control.inspect(destination=[node], timeout=timeout_s).active_queues() or {}
    except OSError:  # broker unreachable
        return None
    finally:
        app.close()
    return sorted(q["name"] for q in answers[node]) if node in answers else None


def task_hostname() -> str:
    """Airflow's ``[core] hostname_callable`` for the stack's workers: the worker's node name, so a task
    instance read back through the REST API says which worker ran it (both share the host here); unset,
    Airflow's own fully qualified host name."""
    return os.environ.get(WORKER_NAME_ENV) or socket.getfqdn()
