"""Every store test runs on SQLite and on the real PostgreSQL with the same code (``make_store`` in
tests/conftest.py): a fresh SQLite file, or a fresh PostgreSQL schema dropped afterwards.
"""

from __future__ import annotations

import pytest
from store_helpers import DIM, T0, StoreFactory

from solaris.store import FeatureStore


@pytest.fixture
def store(make_store: StoreFactory) -> FeatureStore:
    return make_store()


@pytest.fixture
def version(store: FeatureStore) -> str:
    return store.register_embedding_version("3", "2", DIM, created_at=T0)
