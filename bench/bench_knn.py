"""User KNN neighbour-table build: exact (flat) vs HNSW, and incremental vs full rebuild.

Baselines come from the same run: HNSW's speed and recall are measured against the exact flat index on the
same vectors, and the incremental update (5% of users changed; plain, and also re-querying the users whose
neighbours changed) against a full rebuild of the same table.
Vectors are clustered (as user aggregates are), 32-d, k=10, faiss on 2 threads.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import numpy as np

from solaris.enrichment.aggregates import changed_users
from solaris.enrichment.knn import NeighbourTable, build_neighbours

DIM, K, CLUSTERS, CHANGED = 32, 10, 200, 0.05


def clustered(n: int, rng: np.random.Generator) -> np.ndarray:
    centres = rng.normal(size=(CLUSTERS, DIM))
    return (centres[rng.integers(0, CLUSTERS, n)] + 0.5 * rng.normal(size=(n, DIM))).astype(np.float32)


def timed(**kwargs: object) -> tuple[NeighbourTable, float]:
    started = time.perf_counter()
    table = build_neighbours(k=K, threads=2, **kwargs)
    return table, time.perf_counter() - started


def recall(table: NeighbourTable, exact: NeighbourTable) -> float:
    hits = (table.neighbour_ids[:, :, None] == exact.neighbour_ids[:, None, :]).any(axis=2)
    return float(hits.mean())


def bench(n: int, rng: np.random.Generator) -> list[tuple[str, float, float, float]]:
    """Rows of (what, seconds, users per second, recall vs exact)."""
    ids = np.arange(n)
    before = clustered(n, rng)
    after = before.copy()
    moved = rng.choice(n, int(CHANGED * n), replace=False)
    after[moved] += 0.5 * rng.normal(size=(len(moved), DIM)).astype(np.float32)
    changed = changed_users(ids, before, ids, after)
    rows = []
    for method, threshold in (("exact", n + 1), ("hnsw", 0)):
        previous, _ = timed(user_ids=ids, vectors=before, exact_threshold=threshold)
        full, full_s = timed(user_ids=ids, vectors=after, exact_threshold=threshold)
        if method == "exact":
            exact = full
        rows.append((f"{method} full", full_s, n / full_s, recall(full, exact)))
        for flag, label in ((False, "incremental"), (True, "incr.+neighbours")):
            incremental, inc_s = timed(
                user_ids=ids,
                vectors=after,
                exact_threshold=threshold,
                previous=previous,
                changed_user_ids=changed,
                requery_neighbours_of_changed=flag,
            )
            rows.append((f"{method} {label}", inc_s, n / inc_s, recall(incremental, exact)))
    return rows


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k users only")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"incremental rows: {CHANGED:.0%} of users changed; recall@10 against the exact full rebuild")
    print(f"{'users':>8}  {'build':<24} {'seconds':>8} {'users/s':>10} {'recall@10':>10} {'vs exact full':>14}")
    for n in [10_000] if args.quick else [10_000, 100_000]:
        rows = bench(n, rng)
        baseline = rows[0][1]
        for what, seconds, rate, rec in rows:
            print(f"{n:>8,}  {what:<24} {seconds:>8.2f} {rate:>10,.0f} {rec:>10.3f} {baseline / seconds:>13.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
