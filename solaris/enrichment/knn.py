"""The user KNN neighbour table: for each user, the ``k`` most similar users by aggregate embedding.

It backs the third serving tier: when neither the pair nor the user aggregate is fresh enough, the ranker
borrows the neighbours' embeddings for the same item. Similarity is cosine (vectors L2-normalised, inner
product). Below ``exact_threshold`` users an exact flat index is cheap enough; above it an HNSW graph trades a
little recall for speed (an exact all-users search grows as n^2 and takes hours at a million users).

Incremental update: only users who are new, whose aggregate changed, or whose stored neighbours include a
user that no longer exists are re-queried; everyone else keeps last run's row. The staleness this leaves:
an unchanged user does not see that a changed or new user has moved close to it, nor that a neighbour moved
away, until it is re-queried or a full rebuild runs (``full_rebuild=True``; the DAG can schedule one daily).
``requery_neighbours_of_changed=True`` also re-queries every user whose row holds a changed user, which
removes the second kind. Measured on clustered vectors (bench/bench_knn.py, 10k users, 5% changed): recall
against a full rebuild 0.958 for the plain update, 0.999 with that flag, which re-queries about 43% of users.
"""

from __future__ import annotations

from dataclasses import dataclass

import faiss
import numpy as np

PAD_ID = -1


@dataclass(frozen=True)
class NeighbourTable:
    """Rows sorted by user id; slots without a neighbour hold id ``-1`` and similarity 0."""

    user_ids: np.ndarray  # [n] int64
    neighbour_ids: np.ndarray  # [n, k] int64
    similarities: np.ndarray  # [n, k] float32, cosine, descending within a row

    @property
    def k(self) -> int:
        return int(self.neighbour_ids.shape[1])

    def rows(self, user_ids: np.ndarray) -> NeighbourTable:
        """The rows of ``user_ids`` (all present), e.g. to upsert only what a run recomputed."""
        user_ids = np.asarray(user_ids, dtype=np.int64)
        pos = np.searchsorted(self.user_ids, user_ids)
        found = np.zeros(len(user_ids), bool)
        inside = pos < len(self.user_ids)
        found[inside] = self.user_ids[pos[inside]] == user_ids[inside]
        if not found.all():
            raise KeyError(f"user {user_ids[~found][0]} is not in the neighbour table")
        return NeighbourTable(self.user_ids[pos], self.neighbour_ids[pos], self.similarities[pos])


def _validated(user_ids: np.ndarray, vectors: np.ndarray, k: int) -> tuple[np.ndarray, np.ndarray]:
    """Unit-norm float32 vectors, ordered by user id."""
    user_ids = np.asarray(user_ids, dtype=np.int64)
    vectors = np.asarray(vectors)
    if vectors.ndim != 2 or len(vectors) != len(user_ids):
        raise ValueError(f"vectors must be [users={len(user_ids)}, dim], got shape {vectors.shape}")
    if k < 1:
        raise ValueError(f"k must be at least 1, got {k}")
    order = np.argsort(user_ids, kind="stable")
    user_ids, vectors = user_ids[order], vectors[order].astype(np.float32)
    dup = np.flatnonzero(np.diff(user_ids) == 0)
    if len(dup):
        raise ValueError(f"user {user_ids[dup[0]]} appears more than once")
    norms = np.linalg.norm(vectors, axis=1)
    bad = np.flatnonzero(~np.isfinite(norms) | (norms == 0))
    if len(bad):
        raise ValueError(f"user {user_ids[bad[0]]} has a zero or non-finite vector; cosine is undefined")
    return user_ids, vectors / norms[:, None]


def _index(
    vectors: np.ndarray, exact: bool, hnsw_m: int, ef_construction: int, ef_search: int
) -> faiss.Index:
    dim = vectors.shape[1]
    if exact:
        index = faiss.IndexFlatIP(dim)
    else:
        index = faiss.IndexHNSWFlat(dim, hnsw_m, faiss.METRIC_INNER_PRODUCT)
        index.hnsw.efConstruction = ef_construction
        index.hnsw.efSearch = ef_search
    index.add(vectors)
    return index


def _search(
    index: faiss.Index, all_ids: np.ndarray, query_pos: np.ndarray, vectors: np.ndarray, k: int
) -> tuple[np.ndarray, np.ndarray]:
    """Top-k neighbours other than the user itself.

    One extra result is asked for so that dropping the user's own hit still leaves k. Self is found by
    position, not by similarity, because a different user with an identical vector also scores 1.0.
    """
    sims, labels = index.search(vectors[query_pos], k + 1)
    is_self = labels == query_pos[:, None]
    missing = labels < 0
    # Stable sort moves self and missing slots to the end while keeping the similarity order of the rest.
    keep = np.argsort(is_self | missing, axis=1, kind="stable")[:, :k]
    labels = np.take_along_axis(labels, keep, axis=1)
    sims = np.take_along_axis(sims, keep, axis=1)
    dropped = np.take_along_axis(is_self | missing, keep, axis=1)
    ids = np.where(dropped, PAD_ID, all_ids[labels.clip(min=0)])
    return ids.astype(np.int64), np.where(dropped, 0.0, sims).astype(np.float32)


def users_to_requery(
    user_ids: np.ndarray,
    changed_user_ids: np.ndarray,
    previous: NeighbourTable,
    k: int,
    neighbours_of_changed: bool = False,
) -> np.ndarray:
    """Sorted ids of the users an incremental build must search for.

    Beyond new and changed users, a user is re-queried when a stored neighbour no longer exists (its row
    would point at nothing), when its row has empty slots that the current population could fill, and,
    with ``neighbours_of_changed``, when a stored neighbour is a changed user.
    """
    if previous.k != k:
        raise ValueError(f"previous table has k={previous.k}, asked for k={k}; use full_rebuild=True")
    user_ids = np.unique(np.asarray(user_ids, dtype=np.int64))
    still_here = np.isin(previous.user_ids, user_ids)
    rows = previous.neighbour_ids[still_here]
    padded = rows == PAD_ID
    broken = (~padded & ~np.isin(rows, user_ids)).any(axis=1)
    if len(user_ids) > k:
        broken |= padded.any(axis=1)
    if neighbours_of_changed:
        broken |= np.isin(rows, changed_user_ids).any(axis=1)
    new = ~np.isin(user_ids, previous.user_ids)
    changed = np.isin(user_ids, changed_user_ids)
    return user_ids[new | changed | np.isin(user_ids, previous.user_ids[still_here][broken])]


def build_neighbours(
    user_ids: np.ndarray,
    vectors: np.ndarray,
    k: int,
    *,
    exact_threshold: int = 50_000,
    previous: NeighbourTable | None = None,
    changed_user_ids: np.ndarray | None = None,
    full_rebuild: bool = False,
    requery_neighbours_of_changed: bool = False,
    hnsw_m: int = 32,
    ef_construction: int = 80,
    ef_search: int = 128,
    threads: int = 2,
) -> NeighbourTable:
    """The neighbour table for the current users, reusing ``previous`` rows for users that did not change.

    The index always holds every current user (anyone may be a changed user's neighbour); only the
    re-queried users are searched, which is where an all-users build spends its time. ``threads`` sets
    faiss's OpenMP pool (process-wide; our workers have 2 cores).
    """
    ids, unit = _validated(user_ids, vectors, k)
    if previous is None or full_rebuild:
        query_ids = ids
    elif changed_user_ids is None:
        raise ValueError("an incremental build needs changed_user_ids (or full_rebuild=True)")
    else:
        changed = np.asarray(changed_user_ids, np.int64)
        query_ids = users_to_requery(ids, changed, previous, k, requery_neighbours_of_changed)
    faiss.omp_set_num_threads(threads)
    index = _index(unit, len(ids) < exact_threshold, hnsw_m, ef_construction, ef_search)
    query_pos = np.searchsorted(ids, query_ids)
    neighbour_ids = np.full((len(ids), k), PAD_ID, np.int64)
    similarities = np.zeros((len(ids), k), np.float32)
    neighbour_ids[query_pos], similarities[query_pos] = _search(index, ids, query_pos, unit, k)
    kept = np.setdiff1d(ids, query_ids, assume_unique=True)
    if len(kept):
        old = previous.rows(kept)
        kept_pos = np.searchsorted(ids, kept)
        neighbour_ids[kept_pos], similarities[kept_pos] = old.neighbour_ids, old.similarities
    return NeighbourTable(ids, neighbour_ids, similarities)
