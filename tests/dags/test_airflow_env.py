"""The Airflow environment the bootstrap helper builds: where its home, DAGs and metadata DB are."""

from __future__ import annotations

import pytest

from solaris.airflow_env import DAGS_FOLDER, PLUGINS_FOLDER, airflow_env
from solaris.config import Settings


def test_embedded_default_is_sqlite_under_airflow_home(settings: Settings) -> None:
    env = airflow_env(settings)
    assert env["AIRFLOW_HOME"] == str(settings.airflow_home)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == f"sqlite:///{settings.airflow_home / 'airflow.db'}"
    assert env["AIRFLOW__CORE__DAGS_FOLDER"] == str(DAGS_FOLDER) and (DAGS_FOLDER / "solaris_precompute.py").exists()
    assert env["AIRFLOW__CORE__PLUGINS_FOLDER"] == str(PLUGINS_FOLDER)
    assert (PLUGINS_FOLDER / "solaris_plugin.py").exists()
    assert (env["AIRFLOW__CORE__LOAD_EXAMPLES"], env["AIRFLOW__CORE__PARALLELISM"]) == ("False", "6")
    assert "AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC" not in env
    assert env["SOLARIS_STORE_URL"] == settings.store_url  # tasks in child processes see the same settings


def test_postgres_metadata_db_sets_the_async_url_too(settings: Settings) -> None:
    url = "postgresql+psycopg://postgres@127.0.0.1:5432/airflow"
    env = airflow_env(settings, url)
    assert env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN"] == env["AIRFLOW__DATABASE__SQL_ALCHEMY_CONN_ASYNC"] == url
    with pytest.raises(ValueError, match="mysql://x"):
        airflow_env(settings, "mysql://x")
