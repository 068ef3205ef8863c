"""Feature-store throughput and latency, each against a floor measured in the same run on the same rows.

- bulk write: the store's pair write (validate, encode, stage, upsert) vs a raw binary COPY of the same rows
  (PostgreSQL) and vs a plain executemany INSERT (SQLite), each into a plain table with the store's key and
  expiry index, so the floor pays for the same indexes and the ratio is the store's own overhead;
- serving read: ``read_tiers`` for 1 user x 200 candidates (all four tiers: pair, aggregate, 10 neighbours
  per user, and A2A over 20 neighbours per item among the pool the users' pairs are drawn from) vs one raw
  ``IN`` / ``= ANY`` query on the pair table (one tier, no decoding), the two taking turns on the same
  requests, with the share of candidates the A2A tier answers (it must find rows to be measured); measured
  twice, as the writes left the planner statistics (each table or partition analyzed by its first
  write, so stale) and after a full ``ANALYZE`` (as autovacuum leaves them within minutes), since a plan that
  is only right in one state is not right;
- expiry: the time to expire a quarter of the pair rows (one expiry hour of four) at two table sizes.
"""

from __future__ import annotations

import argparse
import os
import sqlite3
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator, Sequence
from contextlib import closing, contextmanager
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import psycopg

from solaris.store import FeatureStore, PostgresStoreConfig, SqliteStoreConfig, open_store
from solaris.store.codec import encode_vectors, to_micros
from solaris.store.pgcopy import binary_copy_payload
from solaris.store.records import ExposureCounts

T0 = datetime(2026, 3, 1, tzinfo=UTC)
HOUR = timedelta(hours=1)
DIM, ITEMS_PER_USER, ITEM_POOL, NEIGHBOURS, BATCH, EXPIRY_HOURS = 32, 200, 4000, 10, 50_000, 4
ITEM_NEIGHBOURS = 20
ADMIN_URL = os.environ.get("SOLARIS_BENCH_PG_URL", "postgresql+psycopg://postgres@127.0.0.1:5432/postgres")


@dataclass(frozen=True)
class Pairs:
    users: np.ndarray
    items: np.ndarray
    vectors: np.ndarray
    scores: np.ndarray

    @classmethod
    def make(cls, rows: int, seed: int = 0) -> Pairs:
        """``rows / 200`` users with 200 distinct items each from a shared pool (so neighbours overlap)."""
        rng = np.random.default_rng(seed)
        n_users = rows // ITEMS_PER_USER
        items = np.argsort(rng.random((n_users, ITEM_POOL)), axis=1)[:, :ITEMS_PER_USER]
        n = n_users * ITEMS_PER_USER
        return cls(
            np.repeat(np.arange(n_users, dtype=np.int64), ITEMS_PER_USER),
            items.ravel().astype(np.int64),
            rng.normal(size=(n, DIM)).astype(np.float32),
            rng.random(n).astype(np.float32),
        )

    def batches(self) -> Iterator[tuple[int, slice]]:
        for k, start in enumerate(range(0, len(self.users), BATCH)):
            yield k, slice(start, start + BATCH)


def expires(k: int) -> datetime:
    """Batches cycle through four expiry hours, so a quarter of the rows expire together."""
    return T0 + (1 + k % EXPIRY_HOURS) * HOUR


def fill(store: FeatureStore, data: Pairs) -> tuple[str, float]:
    """Write all tiers and the exposure counters; returns the version and the seconds spent writing pairs."""
    version = store.register_embedding_version("1", "1", DIM, created_at=T0)
    started = time.perf_counter()
    for k, s in data.batches():
        store.write_pair_embeddings(
            "bench", version, data.users[s], data.items[s], data.vectors[s], data.scores[s], T0, expires(k)
        )
    seconds = time.perf_counter() - started
    users = np.unique(data.users)
    rng = np.random.default_rng(1)
    store.write_user_aggregates(
        "bench",
        version,
        users,
        rng.normal(size=(len(users), DIM)),
        np.full(len(users), ITEMS_PER_USER),
        24,
        T0,
        T0 + EXPIRY_HOURS * HOUR,
    )
    neighbours = (users[:, None] + rng.integers(1, len(users), (len(users), NEIGHBOURS))) % len(users)
    neighbours.sort(axis=1)
    dup = np.zeros_like(neighbours, dtype=bool)
    dup[:, 1:] = neighbours[:, 1:] == neighbours[:, :-1]
    store.write_user_neighbours(
        "bench",
        version,
        users,
        np.where(dup, -1, neighbours),
        rng.uniform(0.1, 1, neighbours.shape),
        T0,
        T0 + EXPIRY_HOURS * HOUR,
    )
    items = np.arange(ITEM_POOL)  # each item's 20 distinct others, from the pool every user's pairs come from
    offsets = np.stack([rng.choice(np.arange(1, ITEM_POOL), ITEM_NEIGHBOURS, replace=False) for _ in items])
    store.write_item_neighbours(
        "bench",
        version,
        items,
        (items[:, None] + offsets) % ITEM_POOL,
        rng.uniform(0.1, 1, offsets.shape),
        T0,
        T0 + EXPIRY_HOURS * HOUR,
    )
    counts = rng.integers(0, 30, size=(len(users), 3))  # each user's counters name every item it has a pair for
    store.write_exposure_counts(
        "bench",
        ExposureCounts(users, counts, data.users, data.items, rng.integers(0, 4, size=(len(data.users), 3))),
        T0,
        T0 + EXPIRY_HOURS * HOUR,
    )
    return version, seconds


def raw_copy_seconds(dsn: str, data: Pairs) -> float:
    """COPY of the same rows, payload prebuilt, into a plain table with the same columns and indexes."""
    version = np.full(len(data.users), b"fm1-ae1-d32", dtype="V11")
    run = np.full(len(data.users), b"bench", dtype="V5")
    with psycopg.connect(dsn) as conn:
        conn.execute(
            "CREATE TABLE raw_pairs (version_id TEXT, user_id BIGINT, item_id BIGINT, vector BYTEA, score REAL,"
            " created_at BIGINT, expires_at BIGINT, run_id TEXT, PRIMARY KEY (version_id, user_id, item_id))"
        )
        conn.execute("CREATE INDEX ON raw_pairs (expires_at)")
        conn.commit()
        payloads = [
            binary_copy_payload(
                [  # text and bytea share the binary wire format: the raw bytes
                    ("bytea", version[s]),
                    ("int8", data.users[s]),
                    ("int8", data.items[s]),
                    ("bytea", encode_vectors(data.vectors[s], "float16")),
                    ("float4", data.scores[s]),
                    ("int8", np.full(len(data.users[s]), to_micros(T0, "t"))),
                    ("int8", np.full(len(data.users[s]), to_micros(expires(k), "t"))),
                    ("bytea", run[s]),
                ]
            )
            for k, s in data.batches()
        ]
        started = time.perf_counter()
        for payload in payloads:
            with conn.cursor() as cur, cur.copy("COPY raw_pairs FROM STDIN (FORMAT BINARY)") as copy:
                copy.write(payload)
            conn.commit()
        return time.perf_counter() - started


def raw_executemany_seconds(path: Path, data: Pairs) -> float:
    """A plain executemany INSERT of the same rows (tuples prebuilt) into a table with the same indexes."""
    conn = sqlite3.connect(path)
    conn.execute(
        "CREATE TABLE raw_pairs (version_id TEXT, user_id BIGINT, item_id BIGINT, vector BLOB, score REAL,"
        " created_at BIGINT, expires_at BIGINT, run_id TEXT, PRIMARY KEY (version_id, user_id, item_id))"
    )
    conn.execute("CREATE INDEX raw_pairs_expires_at ON raw_pairs (expires_at)")
    batches = [
        list(
            zip(
                ["fm1-ae1-d32"] * len(data.users[s]),
                data.users[s].tolist(),
                data.items[s].tolist(),
                encode_vectors(data.vectors[s], "float16").tolist(),
                data.scores[s].tolist(),
                [to_micros(T0, "t")] * len(data.users[s]),
                [to_micros(expires(k), "t")] * len(data.users[s]),
                ["bench"] * len(data.users[s]),
                strict=True,
            )
        )
        for k, s in data.batches()
    ]
    started = time.perf_counter()
    for rows in batches:
        with conn:
            conn.executemany("INSERT INTO raw_pairs VALUES (?, ?, ?, ?, ?, ?, ?, ?)", rows)
    seconds = time.perf_counter() - started
    conn.close()
    return seconds


def requests(data: Pairs, n: int, seed: int = 2) -> list[tuple[int, np.ndarray]]:
    """Per request: a user and 200 candidates, half from its own precomputed items, half from the pool."""
    rng = np.random.default_rng(seed)
    n_users = len(data.users) // ITEMS_PER_USER
    out = []
    for user in rng.integers(0, n_users, n):
        own = data.items[user * ITEMS_PER_USER : (user + 1) * ITEMS_PER_USER]
        out.append((int(user), np.concatenate([rng.choice(own, 100, replace=False), rng.integers(0, ITEM_POOL, 100)])))
    return out


def paired_latencies_ms(
    calls: Sequence[Callable[[int, np.ndarray], object]], reqs: list[tuple[int, np.ndarray]], warm: bool = True
) -> list[np.ndarray]:
    """Each call's latencies on the same requests, the calls taking turns at going first: run one after the
    other, the second would find the first's pages (and, on PostgreSQL, its hint bits) already warm. ``warm``
    first runs the first 50 requests untimed (caches, prepared statements)."""
    for user, items in reqs[:50] if warm else []:
        for call in calls:
            call(user, items)
    times: list[list[float]] = [[] for _ in calls]
    for k, (user, items) in enumerate(reqs):
        for j in range(len(calls)) if k % 2 else reversed(range(len(calls))):
            started = time.perf_counter()
            calls[j](user, items)
            times[j].append((time.perf_counter() - started) * 1e3)
    return [np.array(t) for t in times]


def sqlite_floor(path: str, version: str, t: int) -> Callable[[int, np.ndarray], object]:
    conn = sqlite3.connect(path)
    sql = (
        "SELECT item_id, vector FROM pair_embeddings WHERE version_id = ? AND user_id = ? AND expires_at > ?"
        f" AND item_id IN ({', '.join('?' * ITEMS_PER_USER)})"
    )
    return lambda user, items: conn.execute(sql, (version, user, t, *items.tolist())).fetchall()


def postgres_floor(dsn: str, version: str, t: int) -> Callable[[int, np.ndarray], object]:
    """One generic plan (no planning per request) that tests the items as a filter on the user's key range
    (``+ 0``): whatever the statistics say, where the planner's own choice, once a partition has statistics,
    probes the index once per item (~4x slower) and spends ~0.4 ms planning each request."""
    conn = psycopg.connect(dsn, autocommit=True, options="-csearch_path=bench -cplan_cache_mode=force_generic_plan")
    sql = (
        "SELECT item_id, vector FROM pair_embeddings WHERE version_id = %s AND user_id = %s AND expires_at > %s"
        " AND item_id + 0 = ANY(%s)"
    )
    return lambda user, items: conn.execute(sql, (version, user, t, items.tolist()), prepare=True).fetchall()


def expiry_seconds(store: FeatureStore) -> float:
    """Expire the first expiry hour (a quarter of the pairs): on PostgreSQL one whole partition."""
    started = time.perf_counter()
    store.expire(T0 + 2 * HOUR - timedelta(microseconds=1))
    return time.perf_counter() - started


@contextmanager
def backend_config(
    backend: str, workdir: Path, tag: str
) -> Iterator[tuple[SqliteStoreConfig | PostgresStoreConfig, str]]:
    """A fresh store config and the raw DSN/path of the same database; PostgreSQL gets its own database."""
    if backend == "sqlite":
        path = workdir / f"{tag}.db"
        yield SqliteStoreConfig(path), str(path)
        return
    name = f"solaris_bench_{uuid.uuid4().hex[:8]}"
    admin_dsn = ADMIN_URL.replace("postgresql+psycopg://", "postgresql://", 1)
    with psycopg.connect(admin_dsn, autocommit=True) as admin:
        admin.execute(f'CREATE DATABASE "{name}"')
        try:
            url = ADMIN_URL.rsplit("/", 1)[0] + f"/{name}"
            yield PostgresStoreConfig(url, schema="bench"), url.replace("postgresql+psycopg://", "postgresql://", 1)
        finally:
            admin.execute(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)')


def analyze(backend: str, raw: str) -> None:
    """Planner statistics for every table, as autovacuum (PostgreSQL) or ``PRAGMA optimize`` would leave."""
    if backend == "postgresql":
        with psycopg.connect(raw, autocommit=True, options="-csearch_path=bench") as conn:
            conn.execute("ANALYZE")
    else:
        with closing(sqlite3.connect(raw)) as conn:
            conn.execute("ANALYZE")


def read_latencies(
    store: FeatureStore, backend: str, raw: str, version: str, reqs: list[tuple[int, np.ndarray]]
) -> dict[str, float]:
    t = T0 + HOUR / 2
    floor_query = sqlite_floor if backend == "sqlite" else postgres_floor
    read, floor = paired_latencies_ms(
        [lambda u, items: store.read_tiers(version, u, items, t), floor_query(raw, version, to_micros(t, "t"))], reqs
    )
    a2a = np.mean([store.read_tiers(version, u, items, t).a2a_mask.mean() for u, items in reqs[:50]])
    return {
        "read_p50": np.percentile(read, 50),
        "read_p99": np.percentile(read, 99),
        "floor_p50": np.percentile(floor, 50),
        "floor_p99": np.percentile(floor, 99),
        "a2a_share": a2a,
    }


def bench_backend(
    backend: str, rows: int, small_rows: int, n_requests: int, workdir: Path
) -> tuple[dict[str, float], dict[str, dict[str, float]]]:
    """Write and expiry figures, and the read figures per planner-statistics state."""
    data = Pairs.make(rows)
    out: dict[str, float] = {"rows": len(data.users)}
    reads: dict[str, dict[str, float]] = {}
    with backend_config(backend, workdir, "big") as (config, raw):
        with open_store(config, init=True) as store:
            version, write_s = fill(store, data)
            out["write_rows_s"] = len(data.users) / write_s
            if backend == "postgresql":
                floor_s = raw_copy_seconds(raw, data)
            else:
                floor_s = raw_executemany_seconds(Path(raw), data)
            out["floor_rows_s"] = len(data.users) / floor_s
            reqs = requests(data, n_requests)
            reads["as written"] = read_latencies(store, backend, raw, version, reqs)
            analyze(backend, raw)
            reads["analyzed"] = read_latencies(store, backend, raw, version, reqs)
            out["expire_big_s"] = expiry_seconds(store)
    with backend_config(backend, workdir, "small") as (config, _), open_store(config, init=True) as store:
        fill(store, Pairs.make(small_rows))
        out["expire_small_s"] = expiry_seconds(store)
    return out, reads


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k pair rows (expiry compared with 10k)")
    parser.add_argument("--backend", choices=["sqlite", "postgresql", "both"], default="both")
    args = parser.parse_args(argv)
    rows, small, n_requests = (100_000, 10_000, 300) if args.quick else (1_000_000, 100_000, 1_000)
    backends = ["sqlite", "postgresql"] if args.backend == "both" else [args.backend]
    with tempfile.TemporaryDirectory() as tmp:
        results = {backend: bench_backend(backend, rows, small, n_requests, Path(tmp)) for backend in backends}
    print(
        f"{'backend':<11} {'rows':>9} {'write r/s':>10} {'floor r/s':>10} {'write/floor':>11} "
        f"{'expire ' + format(small, ',') + ' s':>15} {'expire ' + format(rows, ',') + ' s':>17}"
    )
    for backend, (r, _) in results.items():
        print(
            f"{backend:<11} {r['rows']:>9,.0f} {r['write_rows_s']:>10,.0f} {r['floor_rows_s']:>10,.0f} "
            f"{r['write_rows_s'] / r['floor_rows_s']:>10.0%} {r['expire_small_s']:>15.3f} {r['expire_big_s']:>17.3f}"
        )
    print(
        f"\n{'backend':<11} {'statistics':<10} {'read p50':>9} {'read p99':>9} {'floor p50':>9} {'floor p99':>9} "
        f"{'p50/floor':>9} {'p99/floor':>9} {'A2A hit':>8}"
    )
    for backend, (_, reads) in results.items():
        for stats, r in reads.items():
            print(
                f"{backend:<11} {stats:<10} {r['read_p50']:>7.2f}ms {r['read_p99']:>7.2f}ms {r['floor_p50']:>7.2f}ms "
                f"{r['floor_p99']:>7.2f}ms {r['read_p50'] / r['floor_p50']:>8.1f}x {r['read_p99'] / r['floor_p99']:>8.1f}x"
                f" {r['a2a_share']:>8.0%}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
