"""Airflow on the embedded setup: its environment, its metadata database, and the ``gpu`` pool.

Airflow reads its configuration when ``airflow`` is first imported, so :func:`bootstrap` sets the process
environment before anything imports it; the same variables go to child processes (``airflow dags test``,
the scheduler). The metadata database is SQLite under ``AIRFLOW_HOME`` unless a PostgreSQL URL is given; it
is never the feature store's or MLflow's database (each keeps its own ``alembic_version``).
"""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

from solaris.config import Settings

DAGS_FOLDER = Path(__file__).resolve().parents[1] / "dags"
PLUGINS_FOLDER = DAGS_FOLDER.parent / "plugins"
GPU_POOL = "gpu"
GPU_POOL_SLOTS = 1


def airflow_env(settings: Settings, metadata_url: str | None = None) -> dict[str, str]:
    """The variables an Airflow process needs here, plus the ``SOLARIS_*`` settings its tasks read."""
    home = settings.airflow_home
    url = metadata_url or f"sqlite:///{home / 'airflow.db'}"
    if not url.startswith(("sqlite:///", "postgresql+psycopg://")):
        raise ValueError(f"Airflow metadata URL {url!r}: expected sqlite:///<path> or postgresql+psycopg://…")
    env = {
        "AIRFLOW_HOME": str(home),
        "AIRFLOW__CORE__DAGS_FOLDER": str(DAGS_FOLDER),
        "AIRFLOW__CORE__PLUGINS_FOLDER": str(PLUGINS_FOLDER),
        "AIRFLOW__CORE__LOAD_EXAMPLES": "False",
        # Airflow's default of 32 workers swamps a 2-core machine. 6: the hourly run's 4 at once, and 2 more
        # for a day's training, whose tasks run at low CPU priority and must not hold the hourly run's slots.
        "AIRFLOW__CORE__PARALLELISM": "6",
        "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN": url,
    }
    if url.startswith("postgresql"):
        # Without it Airflow 3 derives an asyncpg URL, and asyncpg is not installed.
        env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] = url
    return env | settings.as_env()


def _airflow(args: list[str], env: dict[str, str]) -> None:
    done = subprocess.run(
        [sys.executable, "-m", "airflow", *args], env=os.environ | env, capture_output=True, text=True
    )
    if done.returncode:
        raise RuntimeError(f"`airflow {' '.join(args)}` failed ({done.returncode}):\n{done.stderr[-3000:]}")


def point_process_at(settings: Settings, metadata_url: str | None = None) -> dict[str, str]:
    """Set this process's ``AIRFLOW*`` variables (its settings are already loaded); the whole environment, for
    child processes. Airflow reads them when first imported."""
    env = airflow_env(settings, metadata_url)
    os.environ.update({k: v for k, v in env.items() if k.startswith("AIRFLOW")})
    return env


def bootstrap(settings: Settings, metadata_url: str | None = None) -> dict[str, str]:
    """Point this process at Airflow (before it is imported), migrate the metadata DB, create the gpu pool.

    Only the ``AIRFLOW*`` variables enter this process's environment (its settings are already loaded); the
    returned environment, settings included, is for child processes. Both commands are idempotent (about
    5 s each on SQLite), so calling this again is safe.
    """
    if "airflow" in sys.modules and os.environ.get("AIRFLOW_HOME") != str(settings.airflow_home):
        raise RuntimeError("airflow was imported before bootstrap(); its configuration is already fixed")
    env = point_process_at(settings, metadata_url)
    settings.airflow_home.mkdir(parents=True, exist_ok=True)
    _airflow(["db", "migrate"], env)
    _airflow(["pools", "set", GPU_POOL, str(GPU_POOL_SLOTS), "FM embedding shards (one per GPU)"], env)
    return env
