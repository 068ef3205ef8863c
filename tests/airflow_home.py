"""Each test process's own Airflow home. Airflow reads its configuration once, when first imported, and a test
module may import it (the store's Airflow connections, the login page) before the DAG tests bootstrap it: so
every process (each xdist worker) is pointed at its home before any test runs; the DAG tests migrate it."""

from __future__ import annotations

import shutil
import tempfile

import pytest

from solaris.airflow_env import point_process_at
from solaris.config import Settings

AIRFLOW_SETTINGS = pytest.StashKey[Settings]()


def point_at_own_airflow(config: pytest.Config) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": tempfile.mkdtemp(prefix="solaris-airflow-")})
    point_process_at(settings)
    config.stash[AIRFLOW_SETTINGS] = settings


def remove_own_airflow(config: pytest.Config) -> None:
    if (settings := config.stash.get(AIRFLOW_SETTINGS, None)) is not None:
        shutil.rmtree(settings.home, ignore_errors=True)
