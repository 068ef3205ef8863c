"""Airflow for the DAG tests: one metadata DB per session (bootstrapped before anything imports airflow)."""

from __future__ import annotations

from typing import Any

import pytest

from solaris.airflow_env import DAGS_FOLDER, bootstrap
from solaris.config import Settings


@pytest.fixture(scope="session")
def airflow_env(tmp_path_factory: pytest.TempPathFactory) -> dict[str, str]:
    """Tasks run in this process and read their settings from each test's environment (precompute_env)."""
    return bootstrap(Settings.from_env({"SOLARIS_HOME": str(tmp_path_factory.mktemp("airflow"))}))


@pytest.fixture(scope="session")
def dagbag(airflow_env: dict[str, str]) -> Any:
    from airflow.models import DagBag

    return DagBag(dag_folder=str(DAGS_FOLDER))
