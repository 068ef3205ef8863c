"""Random impression tables small enough to check against brute-force references."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest

from solaris.models.features import US_PER_HOUR


def random_impressions(rng: np.random.Generator, n: int = 400) -> pa.Table:
    ts = rng.integers(0, 48, n) * US_PER_HOUR // 2 + rng.integers(0, 3, n)  # many equal timestamps
    return pa.table(
        {
            "user_id": pa.array(rng.integers(0, 6, n), pa.int64()),
            "ts": pa.array(ts, pa.int64()).cast(pa.timestamp("us", tz="UTC")),
            "item_id": pa.array(rng.integers(0, 5, n), pa.int64()),
            "click": pa.array(rng.integers(0, 2, n), pa.int8()),
            "conversion": pa.array(rng.integers(0, 2, n), pa.int8()),
        }
    )


@pytest.fixture(scope="session")
def make_impressions() -> Callable[..., pa.Table]:
    return random_impressions
