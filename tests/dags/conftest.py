"""Airflow for the DAG tests: one metadata DB per session, in the home each test process has (airflow_home)."""

from __future__ import annotations

from typing import Any

import pytest
from airflow_home import AIRFLOW_SETTINGS

from solaris.airflow_env import DAGS_FOLDER, bootstrap


@pytest.fixture(scope="session")
def airflow_env(pytestconfig: pytest.Config) -> dict[str, str]:
    """Tasks run in this process and read their settings from each test's environment (precompute_env); the
    Airflow home is the one tests/conftest.py pointed this process at."""
    return bootstrap(pytestconfig.stash[AIRFLOW_SETTINGS])


@pytest.fixture(scope="session")
def dagbag(airflow_env: dict[str, str]) -> Any:
    from airflow.models import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER))
