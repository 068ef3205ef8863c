"""Shared constants and helpers of the store tests."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np

from solaris.store import FeatureStore

T0 = datetime(2026, 3, 1, 12, tzinfo=UTC)
HOUR = timedelta(hours=1)
DIM = 8

StoreFactory = Callable[..., FeatureStore]  # make_store: a new store, or same_as=store


def vecs(n: int, seed: int = 0, dim: int = DIM) -> np.ndarray:
    """Random vectors exactly representable in float16, so round trips compare exactly."""
    return np.random.default_rng(seed).normal(size=(n, dim)).astype(np.float16).astype(np.float32)


def count_rows(store: FeatureStore, table: str) -> int:
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        return int(conn.exec_driver_sql(f"SELECT count(*) FROM {table}").scalar_one())
