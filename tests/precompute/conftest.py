"""Fixtures for the precompute tests."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from pathlib import Path

import pytest
from precompute_env import backend_settings
from precompute_logs import LogFactory, Request, build_log

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.training.jobs import TrainReport, World


@pytest.fixture
def make_log(tmp_path: Path) -> LogFactory:
    """Build a fresh event log per call, each in its own folder."""
    numbers = count()

    def make(requests: Sequence[Request]) -> EventLog:
        return build_log(tmp_path / f"log{next(numbers)}", requests)

    return make


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def run_settings(
    request: pytest.FixtureRequest, trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> Settings:
    """The session's world and models with a store of the test's own: SQLite, or PostgreSQL in its own schema."""
    return backend_settings(request, trained[0], tmp_path, "run")
