"""Every store test runs on SQLite and on the real PostgreSQL with the same code.

Each test gets its own store: a fresh SQLite file, or a fresh PostgreSQL schema dropped afterwards.
"""

from __future__ import annotations

import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
import sqlalchemy as sa
from store_helpers import DIM, T0, StoreFactory

from solaris.store import FeatureStore, PostgresStoreConfig, SqliteStoreConfig, open_store


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def backend(request: pytest.FixtureRequest) -> str:
    return request.param


@pytest.fixture
def make_store(backend: str, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[StoreFactory]:
    """Opens a new, empty, initialised store per call (the property test needs one per example)."""
    opened: list[FeatureStore] = []
    schemas: list[str] = []
    pg_url = request.getfixturevalue("pg_url") if backend == "postgres" else None

    def make() -> FeatureStore:
        if pg_url is None:
            config = SqliteStoreConfig(tmp_path / f"store_{uuid.uuid4().hex[:8]}.db")
        else:
            schemas.append(f"t_{uuid.uuid4().hex[:12]}")
            config = PostgresStoreConfig(pg_url, schema=schemas[-1], pool_size=12)
        opened.append(open_store(config, init=True))
        return opened[-1]

    yield make
    for store in opened:
        store.close()
    if schemas:
        engine = sa.create_engine(pg_url)
        with engine.begin() as conn:
            for schema in schemas:
                conn.exec_driver_sql(f'DROP SCHEMA IF EXISTS "{schema}" CASCADE')
        engine.dispose()


@pytest.fixture
def store(make_store: StoreFactory) -> FeatureStore:
    return make_store()


@pytest.fixture
def version(store: FeatureStore) -> str:
    return store.register_embedding_version("3", "2", DIM, created_at=T0)

