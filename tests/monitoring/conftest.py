"""Fixtures of the health-report tests: the known world of :mod:`health_world` in a test's own home."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest
from health_world import PAIR_BATCHES, HealthWorld, log_figures, run_key, write_store

from solaris.config import Settings
from solaris.store import open_store
from solaris.tracking import registry


@pytest.fixture(scope="session")
def empty_mlflow_db(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """An MLflow database with its schema made once per session: creating one costs seconds of migrations."""
    home = tmp_path_factory.mktemp("mlflow_template")
    settings = Settings.from_env({"SOLARIS_HOME": str(home)})
    registry.connect(settings).search_experiments()
    return Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///"))


@pytest.fixture
def health_world(settings: Settings, empty_mlflow_db: Path) -> HealthWorld:
    """The store and MLflow of ``settings`` (a temporary SOLARIS_HOME) filled as :mod:`health_world` describes;
    no champion yet (tests that want one call :func:`register_champion`)."""
    with open_store(settings.store_url, init=True) as store:
        current, older = write_store(store)
    db = Path(settings.mlflow_tracking_uri.removeprefix("sqlite:///"))
    db.parent.mkdir(parents=True)
    shutil.copyfile(empty_mlflow_db, db)
    client = registry.connect(settings)
    figures = {
        run_key(9): {
            "coverage_pair": 0.25,
            "coverage_agg": 0.5,
            "coverage_knn": 0.125,
            "coverage_a2a": 0.375,
            "coverage_cohort": 0.0625,
            "coverage_any": 0.75,
            "hit_rate": 0.375,
            "hit_rate_ttl": 0.625,
        },
        run_key(10): {
            "coverage_pair": 0.5,
            "coverage_agg": 0.625,
            "coverage_knn": 0.25,
            "coverage_a2a": 0.5625,
            "coverage_cohort": 0.125,
            "coverage_any": 0.875,
            "hit_rate": 0.5,
            "hit_rate_ttl": 0.75,
            "hit_ceiling_ttl": 0.9375,
            "shadow_coverage_any": 0.8125,
        },
    }
    log_figures(client, settings, run_key(10), {k: v / 2 for k, v in figures[run_key(10)].items()}, 1_000)
    for i, (key, metrics) in enumerate(figures.items()):
        log_figures(client, settings, key, metrics | {"served_pairs": 40.0}, 2_000 + i)
    return HealthWorld(settings, current, older, PAIR_BATCHES, [run_key(11), run_key(10), run_key(9)], figures)
