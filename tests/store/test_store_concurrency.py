"""The store under concurrent use, on SQLite and PostgreSQL: one writer rewriting a user's candidates while 8
readers serve them (no errors, no torn or mixed reads); two writers of the same keys at once (neither fails,
each table ends as one of them wrote it); expiry while readers read (no read error, no row expired at the
read's time seen, no unexpired row lost)."""

from __future__ import annotations

import threading
from collections.abc import Callable

import numpy as np
from store_helpers import DIM, HOUR, T0, count_rows

from solaris.store import FeatureStore

ITEMS = np.arange(200)
WRITES = 25
READERS = 8


def write_generation(store: FeatureStore, version: str, k: int) -> None:
    """Every vector of generation k is filled with k; the expiry hour moves so rows change partition."""
    n = len(ITEMS)
    store.write_pair_embeddings(
        f"run-{k}",
        version,
        np.ones(n, dtype=np.int64),
        ITEMS,
        np.full((n, DIM), k, dtype=np.float32),
        np.full(n, k, dtype=np.float32),
        T0,
        T0 + (1 + k % 3) * HOUR,
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


def run_together(*actors: Callable[[], None]) -> None:
    """Each actor on its own thread; the first error any of them raised is raised here."""
    errors: list[BaseException] = []

    def guarded(actor: Callable[[], None]) -> None:
        try:
            actor()
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    threads = [threading.Thread(target=guarded, args=(actor,)) for actor in actors]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    real = [e for e in errors if not isinstance(e, threading.BrokenBarrierError)]
    if real or errors:
        raise (real or errors)[0]


WRITER_USERS = np.arange(1, 1001)
WRITER_ROUNDS = 4
PAIR_ITEMS = np.arange(3)


def neighbour_lists(w: int) -> np.ndarray:
    """Writer w's lists: overlapping the other writer's (a shared neighbour), never equal to them."""
    return np.stack([WRITER_USERS + 1 + w + j for j in range(3)], axis=1)


def test_two_writers_of_the_same_keys_at_once(store: FeatureStore, version: str) -> None:
    """Two runs rewriting the same users' rows in step, in opposite user orders, pairs in different expiry
    hours: neither fails (a deadlock, a duplicate key), and each table ends as one of the two wrote it, whole."""
    step = threading.Barrier(2)

    def writer(w: int) -> Callable[[], None]:
        order = WRITER_USERS if w == 0 else WRITER_USERS[::-1]
        users, items = np.repeat(order, len(PAIR_ITEMS)), np.tile(PAIR_ITEMS, len(order))
        n = len(order)
        lists = neighbour_lists(w) if w == 0 else neighbour_lists(w)[::-1]

        def write() -> None:
            try:
                for k in range(WRITER_ROUNDS):
                    run = f"w{w}-{k}"
                    step.wait()
                    store.write_pair_embeddings(
                        run,
                        version,
                        users,
                        items,
                        np.full((len(users), DIM), w, np.float32),
                        np.full(len(users), w, np.float32),
                        T0,
                        T0 + (1 + w) * HOUR,
                    )
                    step.wait()
                    store.write_user_aggregates(
                        run, version, order, np.full((n, DIM), w), np.ones(n, int), 24, T0, T0 + 9 * HOUR
                    )
                    step.wait()
                    store.write_user_neighbours(run, version, order, lists, np.ones((n, 3)), T0, T0 + 9 * HOUR)
            except BaseException:
                step.abort()  # the other writer is not left waiting
                raise

        return write

    run_together(writer(0), writer(1))

    assert count_rows(store, "pair_embeddings") == len(WRITER_USERS) * len(PAIR_ITEMS)  # one row per key
    assert count_rows(store, "user_neighbours") == len(WRITER_USERS) * 3
    read = store.read_tiers_batch(
        version, np.repeat(WRITER_USERS, len(PAIR_ITEMS)), np.tile(PAIR_ITEMS, len(WRITER_USERS)), T0
    )
    assert read.pair_mask.all() and read.user_agg_mask.all()
    assert len(np.unique(read.pair)) == 1 and len(np.unique(read.user_agg)) == 1, "a table mixes the two writers"
    with store.engine.connect() as conn:  # type: ignore[attr-defined]
        rows = conn.exec_driver_sql(
            "SELECT user_id, neighbour_id FROM user_neighbours ORDER BY user_id, neighbour_id"
        ).all()
    stored = np.array(rows).reshape(len(WRITER_USERS), 3, 2)[:, :, 1]
    assert any(np.array_equal(stored, neighbour_lists(w)) for w in (0, 1)), "neighbour lists mix the two writers"


LIVE = np.arange(50)  # never expire within the test
GENERATIONS = 6  # generation g: items 100g..100g+49, expiring at T0 + g hours
EXPIRY_ROUNDS = 3


def generation_items(g: int) -> np.ndarray:
    return 100 * g + np.arange(50)


def test_expiry_while_readers_read(store: FeatureStore, version: str) -> None:
    """Rows expiring hour after hour are written and expired (in small batches; on PostgreSQL whole expiry-hour
    partitions are dropped too) while 4 readers read at hour boundaries: no read fails, a read at t never sees a
    row with expires_at <= t, and the rows that never expire are always all there."""
    every = np.concatenate([LIVE, *(generation_items(g) for g in range(1, GENERATIONS + 1))])
    expires = np.concatenate([np.full(len(LIVE), 100), *(np.full(50, g) for g in range(1, GENERATIONS + 1))])
    generation = np.concatenate([np.zeros(len(LIVE)), *(np.full(50, g) for g in range(1, GENERATIONS + 1))])
    store.write_pair_embeddings(
        "live",
        version,
        np.ones(len(LIVE), int),
        LIVE,
        np.zeros((len(LIVE), DIM)),
        np.ones(len(LIVE)),
        T0,
        T0 + 100 * HOUR,
    )
    done = threading.Event()
    reads = [0] * 4

    def reader(slot: int) -> Callable[[], None]:
        rng = np.random.default_rng(slot)

        def read() -> None:
            while not done.is_set() or reads[slot] == 0:
                hours = int(rng.integers(0, GENERATIONS + 1))
                got = store.read_tiers(version, 1, every, T0 + hours * HOUR)
                seen = got.pair_mask
                assert not (seen & (expires <= hours)).any(), f"a read at T0+{hours}h saw a row expired by then"
                assert seen[: len(LIVE)].all(), "a row that never expires went missing"
                np.testing.assert_array_equal(got.pair[seen, 0], generation[seen])  # each row whole, its own
                reads[slot] += 1

        return read

    def write_and_expire() -> None:
        try:
            for _ in range(EXPIRY_ROUNDS):
                for g in range(1, GENERATIONS + 1):
                    items = generation_items(g)
                    store.write_pair_embeddings(
                        f"g{g}", version, np.ones(50, int), items, np.full((50, DIM), g), np.ones(50), T0, T0 + g * HOUR
                    )
                for g in range(1, GENERATIONS + 1):
                    store.expire(T0 + g * HOUR, batch_size=7)
        finally:
            done.set()

    run_together(write_and_expire, *(reader(i) for i in range(4)))
    assert count_rows(store, "pair_embeddings") == len(LIVE)
