"""Fixtures for the precompute tests."""

from __future__ import annotations

from collections.abc import Sequence
from itertools import count
from pathlib import Path

import pytest

from solaris.data.eventlog import EventLog

from precompute_logs import LogFactory, Request, build_log


@pytest.fixture
def make_log(tmp_path: Path) -> LogFactory:
    """Build a fresh event log per call, each in its own folder."""
    numbers = count()

    def make(requests: Sequence[Request]) -> EventLog:
        return build_log(tmp_path / f"log{next(numbers)}", requests)

    return make
