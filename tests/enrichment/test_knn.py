from __future__ import annotations

import faiss
import numpy as np
import pytest

from solaris.enrichment import knn
from solaris.enrichment.knn import PAD_ID, build_neighbours, pool_index


def clustered(n: int, dim: int, clusters: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    centres = rng.normal(size=(clusters, dim))
    return (centres[rng.integers(0, clusters, n)] + 0.3 * rng.normal(size=(n, dim))).astype(np.float32)


def brute_force(ids: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit.T
    np.fill_diagonal(sims, -np.inf)
    top = np.argsort(-sims, axis=1, kind="stable")[:, :k]
    return ids[top], np.take_along_axis(sims, top, axis=1)


def test_exact_matches_brute_force_and_excludes_self() -> None:
    rng = np.random.default_rng(0)
    ids = rng.permutation(np.arange(500) * 7 + 3)
    vectors = rng.normal(size=(500, 16)).astype(np.float32)
    table = build_neighbours(ids, vectors, k=8)
    order = np.argsort(ids)
    want_ids, want_sims = brute_force(ids[order], vectors[order], 8)
    np.testing.assert_array_equal(table.user_ids, ids[order])
    np.testing.assert_array_equal(table.neighbour_ids, want_ids)
    np.testing.assert_allclose(table.similarities, want_sims, atol=1e-5)
    assert not (table.neighbour_ids == table.user_ids[:, None]).any()


def test_identical_vectors_are_each_others_neighbour_not_their_own() -> None:
    vectors = np.array([[1, 0], [1, 0], [0, 1]], dtype=np.float32)
    table = build_neighbours(np.array([10, 11, 12]), vectors, k=1)
    assert table.neighbour_ids[:, 0].tolist()[:2] == [11, 10]
    np.testing.assert_allclose(table.similarities[:2, 0], [1.0, 1.0])


def test_fewer_users_than_k_pads_with_minus_one_and_zero() -> None:
    table = build_neighbours(np.array([1, 2, 3]), np.eye(3, dtype=np.float32) + 0.1, k=4)
    assert (table.neighbour_ids[:, 2:] == PAD_ID).all() and (table.similarities[:, 2:] == 0).all()
    assert (table.neighbour_ids[:, :2] != PAD_ID).all()


def test_hnsw_recall_on_clustered_vectors() -> None:
    ids = np.arange(3000)
    vectors = clustered(3000, 16, clusters=30, seed=1)
    approx = build_neighbours(ids, vectors, k=10, exact_threshold=1000, ef_search=64)
    exact = build_neighbours(ids, vectors, k=10, exact_threshold=10_000)
    hits = [len(np.intersect1d(a, e)) for a, e in zip(approx.neighbour_ids, exact.neighbour_ids, strict=True)]
    assert np.sum(hits) / exact.neighbour_ids.size >= 0.9


def test_bad_inputs_are_refused_with_the_user() -> None:
    vectors = np.ones((3, 2), np.float32)
    with pytest.raises(ValueError, match="user 2 appears more than once"):
        build_neighbours(np.array([1, 2, 2]), vectors, k=1)
    with pytest.raises(ValueError, match="pooled user 9 has no vector"):
        build_neighbours(np.array([1, 2, 3]), vectors, k=1, pool=np.array([1, 9]))
    with pytest.raises(KeyError, match="user 9"):
        build_neighbours(np.array([1, 2, 3]), vectors, k=1).rows(np.array([9]))


def test_no_users_gives_an_empty_table() -> None:
    table = build_neighbours(np.empty(0, np.int64), np.empty((0, 4), np.float32), k=3)
    assert table.user_ids.shape == (0,) and table.neighbour_ids.shape == (0, 3)


def test_users_outside_the_pool_get_their_nearest_pooled_users() -> None:
    """The neighbour tier lends pooled users' codes: every row, pooled user or not, lists pooled users only."""
    ids = np.arange(400) * 3 + 1
    vectors = clustered(400, 8, clusters=8, seed=10)
    pool = ids[::4]
    table = build_neighbours(ids, vectors, k=5, pool=pool)
    unit = vectors / np.linalg.norm(vectors, axis=1, keepdims=True)
    sims = unit @ unit[::4].T
    sims[np.arange(0, 400, 4), np.arange(100)] = -np.inf  # a pooled user is not its own neighbour
    top = np.argsort(-sims, axis=1, kind="stable")[:, :5]
    np.testing.assert_array_equal(table.neighbour_ids, pool[top])
    np.testing.assert_allclose(table.similarities, np.take_along_axis(sims, top, axis=1), atol=1e-5)


def test_an_empty_pool_pads_every_row() -> None:
    table = build_neighbours(np.array([1, 2]), np.eye(2, dtype=np.float32), k=2, pool=np.empty(0, np.int64))
    assert (table.neighbour_ids == PAD_ID).all() and (table.similarities == 0).all()


def test_the_index_is_flat_below_the_threshold_and_hnsw_from_it() -> None:
    vectors = clustered(300, 8, clusters=5, seed=11)
    assert isinstance(pool_index(vectors, exact_threshold=301), faiss.IndexFlatIP)
    assert isinstance(pool_index(vectors, exact_threshold=300), faiss.IndexHNSWFlat)
    assert knn.EXACT_THRESHOLD == 50_000  # bench/bench_knn.py: flat and HNSW cost about the same there


def test_the_threshold_counts_the_pool_not_the_users(monkeypatch: pytest.MonkeyPatch) -> None:
    built: list[faiss.Index] = []

    def spy(vectors: np.ndarray, **kwargs: object) -> faiss.Index:
        built.append(pool_index(vectors, **kwargs))
        return built[-1]

    monkeypatch.setattr(knn, "pool_index", spy)
    ids, vectors = np.arange(300), clustered(300, 8, clusters=5, seed=12)
    build_neighbours(ids, vectors, k=4, pool=ids[:100], exact_threshold=101)
    build_neighbours(ids, vectors, k=4, pool=ids[:100], exact_threshold=100)
    assert [type(index) for index in built] == [faiss.IndexFlatIP, faiss.IndexHNSWFlat]
    assert [index.ntotal for index in built] == [100, 100]


def test_an_hnsw_build_gives_the_same_rows_every_time() -> None:
    """A rerun of an hour must write the same rows: the graph is inserted on one thread."""
    ids, vectors = np.arange(3000), clustered(3000, 16, clusters=30, seed=13)
    first = build_neighbours(ids, vectors, k=10, exact_threshold=0, threads=2)
    second = build_neighbours(ids, vectors, k=10, exact_threshold=0, threads=2)
    np.testing.assert_array_equal(first.neighbour_ids, second.neighbour_ids)
    np.testing.assert_array_equal(first.similarities, second.similarities)


@pytest.mark.parametrize("users", [50, 3000])  # a flat index and an HNSW one (built on one thread)
def test_the_search_leaves_the_openmp_pool_as_it_found_it(users: int) -> None:
    """faiss's OpenMP pool is process-wide, and torch shares it when loaded first: a KNN step must not leave
    it changed for every later model forward in the process."""
    before = faiss.omp_get_max_threads()
    faiss.omp_set_num_threads(3)  # neither the search's 2 nor the HNSW build's 1
    try:
        vectors = np.random.default_rng(5).normal(size=(users, 8)).astype(np.float32)
        build_neighbours(np.arange(users), vectors, 3, threads=2, exact_threshold=1000)
        assert faiss.omp_get_max_threads() == 3
    finally:
        faiss.omp_set_num_threads(before)


@pytest.mark.parametrize("exact_threshold", [knn.EXACT_THRESHOLD, 100], ids=["flat", "hnsw"])
def test_users_split_among_shards_find_what_one_search_finds(exact_threshold: int) -> None:
    """One index, serialized as the hour stages it, searched by shards of 5, 12 and the rest of 9,000 users:
    every row equal to one search's, bit for bit. With faiss's BLAS products the shards' flat similarities
    were up to 2 float32 ulps off the whole search's (a matrix product's last bits vary with its shape and, on
    AMD EPYC, with a query's row in it, so padding every search to one shape was not enough there)."""
    blas_from = faiss.cvar.distance_compute_blas_threshold
    ids = np.arange(9000, dtype=np.int64) * 3
    vectors = clustered(9000, 32, 30, seed=1)
    built = knn.index_pool(ids, vectors, ids[::3], exact_threshold=exact_threshold)
    whole = knn.search_pool(built, ids, vectors, k=10)
    staged = knn.PoolIndex.from_bytes(built.to_bytes(), built.pool_ids)
    shards = np.split(np.arange(len(ids)), [5, 17])
    parts = [knn.search_pool(staged, ids[rows], vectors[rows], k=10) for rows in shards]
    np.testing.assert_array_equal(np.concatenate([p.user_ids for p in parts]), whole.user_ids)
    np.testing.assert_array_equal(np.concatenate([p.neighbour_ids for p in parts]), whole.neighbour_ids)
    assert np.concatenate([p.similarities for p in parts]).tobytes() == whole.similarities.tobytes()
    assert (whole.neighbour_ids % 9 == 0).all()  # pooled users only: every third id
    assert faiss.cvar.distance_compute_blas_threshold == blas_from  # process-wide: restored
