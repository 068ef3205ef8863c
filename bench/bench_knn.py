"""User KNN build for the hourly neighbour table: exact flat index vs HNSW (what ``build_neighbours`` switches
to from ``EXACT_THRESHOLD`` pooled users), with IVF alongside as the alternative we did not take.

Each row times one index over ``n`` pooled users searched by the same ``n`` users, k=10, 32-d (the FM's user
vector), faiss on 2 threads: the build, the search, and recall@10 against the exact answer on a sample of
2,000 queries. Flat is timed whole up to 50k and extrapolated from the sample above (marked ~); ``vs flat``
is flat's total time over the row's. Two kinds of vectors: clustered (200 clusters, as users sharing side
features are) and near-random (the same clusters drowned in noise: the hardest case for any index).
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Sequence

import faiss
import numpy as np

from solaris.enrichment.knn import EXACT_THRESHOLD, build_neighbours, pool_index

DIM, K, CLUSTERS, SAMPLE, THREADS = 32, 10, 200, 2_000, 2
NOISE = {"clustered": 0.5, "near-random": 3.0}
FLAT_TIMED_UP_TO = 50_000


def vectors(n: int, noise: float, rng: np.random.Generator) -> np.ndarray:
    centres = rng.normal(size=(CLUSTERS, DIM))
    x = (centres[rng.integers(0, CLUSTERS, n)] + noise * rng.normal(size=(n, DIM))).astype(np.float32)
    return x / np.linalg.norm(x, axis=1, keepdims=True)


def ivf(x: np.ndarray, nprobe: int = 32) -> faiss.Index:
    """IVF-Flat with 4 sqrt(n) k-means cells (faiss's rule of thumb), ``nprobe`` searched per query."""
    lists = int(4 * np.sqrt(len(x)))
    index = faiss.IndexIVFFlat(faiss.IndexFlatIP(DIM), DIM, lists, faiss.METRIC_INNER_PRODUCT)
    index.cp.min_points_per_centroid = 1
    index.train(x)
    index.add(x)
    index.nprobe = nprobe
    return index


def others(labels: np.ndarray, queries: np.ndarray) -> np.ndarray:
    """Each row's first K labels other than the query itself (asked for K + 1, as build_neighbours does)."""
    keep = np.argsort(labels == queries[:, None], axis=1, kind="stable")[:, :K]
    return np.take_along_axis(labels, keep, axis=1)


def recall(found: np.ndarray, exact: np.ndarray, queries: np.ndarray) -> float:
    pairs = zip(others(found, queries), others(exact, queries), strict=True)
    return float(np.mean([len(np.intersect1d(a, b)) for a, b in pairs]) / K)


def timed_search(index: faiss.Index, queries: np.ndarray) -> tuple[np.ndarray, float]:
    started = time.perf_counter()
    labels = index.search(queries, K + 1)[1]
    return labels, time.perf_counter() - started


def flat_row(x: np.ndarray, sample: np.ndarray) -> tuple[float, float, np.ndarray]:
    """(build s, search s for all n queries, exact labels of the sample)."""
    started = time.perf_counter()
    index = pool_index(x, exact_threshold=len(x) + 1)
    build = time.perf_counter() - started
    exact, sample_s = timed_search(index, x[sample])
    search = timed_search(index, x)[1] if len(x) <= FLAT_TIMED_UP_TO else sample_s * len(x) / len(sample)
    return build, search, exact


def bench(n: int, noise: float, rng: np.random.Generator) -> list[tuple[str, float, float, float]]:
    """Rows of (index, build s, search s, recall@10 vs exact)."""
    x = vectors(n, noise, rng)
    sample = rng.choice(n, min(SAMPLE, n), replace=False)
    faiss.omp_set_num_threads(THREADS)
    build, search, exact = flat_row(x, sample)
    rows = [("flat" + (" ~" if n > FLAT_TIMED_UP_TO else ""), build, search, 1.0)]
    for name, make in (("hnsw32 ef128", lambda: pool_index(x, exact_threshold=0)), ("ivf nprobe32", lambda: ivf(x))):
        started = time.perf_counter()
        index = make()
        build = time.perf_counter() - started
        labels, search = timed_search(index, x)
        rows.append((name, build, search, recall(labels[sample], exact, sample)))
    return rows


def same_rows_twice(n: int, rng: np.random.Generator) -> bool:
    """Whether two HNSW builds of the same vectors give the same table (a rerun must write the same rows)."""
    x, ids = vectors(n, NOISE["near-random"], rng), np.arange(n)
    first, second = (build_neighbours(ids, x, K, exact_threshold=0, threads=THREADS) for _ in range(2))
    return bool((first.neighbour_ids == second.neighbour_ids).all())


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="10k users only")
    args = parser.parse_args(argv)
    rng = np.random.default_rng(0)
    print(f"n users pooled and queried, k={K}, {DIM}-d, {THREADS} threads; HNSW from {EXACT_THRESHOLD:,} pooled users")
    print(
        f"{'users':>8}  {'vectors':<12} {'index':<14} {'build s':>8} {'search s':>9} {'total s':>8} "
        f"{'recall@10':>10} {'vs flat':>8}"
    )
    for n in [10_000] if args.quick else [10_000, 50_000, 200_000]:
        for kind, noise in NOISE.items():
            rows = bench(n, noise, rng)
            flat_total = rows[0][1] + rows[0][2]
            for what, build, search, rec in rows:
                total = build + search
                print(
                    f"{n:>8,}  {kind:<12} {what:<14} {build:>8.2f} {search:>9.2f} {total:>8.2f} {rec:>10.3f} "
                    f"{flat_total / total:>7.2f}x",
                    flush=True,
                )
    print(f"HNSW table identical on a second build (10k near-random): {same_rows_twice(10_000, rng)}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
