"""Fixtures for the ops tests: here, not in stack_session.py, so the stack tests get them without importing
them."""

from __future__ import annotations

import uuid
from collections.abc import Iterator

import psycopg
import pytest


@pytest.fixture
def airflow_database(pg_url: str) -> Iterator[str]:
    """A database name for this stack's Airflow metadata; ``solaris stack up`` creates it, we drop it."""
    name = f"solaris_stack_{uuid.uuid4().hex[:10]}"
    yield name
    with psycopg.connect(pg_url.replace("postgresql+psycopg://", "postgresql://", 1), autocommit=True) as admin:
        admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')
