"""One writer rewriting a user's candidates while 8 readers serve them: no errors, no torn or mixed reads."""

from __future__ import annotations

import threading

import numpy as np
import pytest
from store_helpers import DIM, HOUR, T0

from solaris.store import FeatureStore

ITEMS = np.arange(200)
WRITES = 25
READERS = 8


def write_generation(store: FeatureStore, version: str, k: int) -> None:
    """Every vector of generation k is filled with k; the expiry hour moves so rows change partition."""
    n = len(ITEMS)
    store.write_pair_embeddings(
        f"run-{k}", version, np.ones(n, dtype=np.int64), ITEMS, np.full((n, DIM), k, dtype=np.float32),
        np.full(n, k, dtype=np.float32), T0, T0 + (1 + k % 3) * HOUR,
    )


def check_read(store: FeatureStore, version: str, seen: list[int]) -> None:
    direct = store.read_tiers(version, 1, ITEMS, T0)
    via_neighbour = store.read_tiers(version, 2, ITEMS, T0)
    assert direct.pair_mask.all() and via_neighbour.knn_mask.all(), "a row went missing mid-rewrite"
    for values in (direct.pair, via_neighbour.knn):
        generations = np.unique(values)
        assert len(generations) == 1, f"torn or mixed read: generations {generations.tolist()}"
    k = int(direct.pair[0, 0])
    assert not seen or k >= seen[-1], f"went back in time: generation {k} after {seen[-1]}"
    seen.append(k)


@pytest.mark.parametrize("backend", [pytest.param("postgres", marks=pytest.mark.postgres)])
def test_writer_and_eight_readers(store: FeatureStore, version: str) -> None:
    write_generation(store, version, 1)
    store.write_user_neighbours("r", version, np.array([2]), np.array([[1]]), np.array([[1.0]]), T0, T0 + 9 * HOUR)
    done = threading.Event()
    errors: list[BaseException] = []
    reads = [0] * READERS

    def reader(slot: int) -> None:
        seen: list[int] = []
        try:
            while not done.is_set():
                check_read(store, version, seen)
                reads[slot] += 1
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=reader, args=(i,)) for i in range(READERS)]
    for thread in threads:
        thread.start()
    try:
        for k in range(2, WRITES + 2):
            write_generation(store, version, k)
    finally:
        done.set()
        for thread in threads:
            thread.join()
    assert not errors, errors[0]
    assert min(reads) > 0
    final = store.read_tiers(version, 1, ITEMS, T0)
    assert (final.pair == WRITES + 1).all()
