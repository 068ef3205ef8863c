"""The steps that find similar users and similar items, for the neighbour and A2A tiers: the FM's vectors,
faiss neighbours, and the store's neighbour tables. The KNN step starts from the state saved before the
hour (:mod:`.knn_state`), so a rerun writes what its first attempt wrote."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path
from typing import TYPE_CHECKING

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.config import Settings
from solaris.enrichment.knn import NeighbourTable, PoolIndex, build_neighbours, degenerate, index_pool, search_pool
from solaris.precompute import knn_state, knn_users, similar_items
from solaris.precompute.expiry import fresh_codes
from solaris.precompute.pipeline import KNN_INDEX, NEIGHBOUR_ROWS, USER_SHARDS, USER_VECTORS
from solaris.precompute.run_files import DEGENERATE, Meta, code_log, event_log, shard_count, step_staging, timed
from solaris.precompute.spec import HourRun, UserShard
from solaris.store import FeatureStore, open_configured_store

if TYPE_CHECKING:  # torch: imported only by the steps that run the FM
    from solaris.models.fm import FoundationModel


def knn_state_dir(settings: Settings, run: HourRun) -> Path:
    return knn_state.state_dir(settings.data_dir / "precompute" / "knn", run.embedding_version)


def pinned_fm(run: HourRun, settings: Settings) -> FoundationModel:
    """The run's pinned FM from the registry (its user and item vectors feed the KNN and A2A steps)."""
    from solaris.models.fm import FoundationModel
    from solaris.tracking import registry

    registry.connect(settings)
    fm = registry.load_fm(run.fm_version)
    if not isinstance(fm, FoundationModel):
        raise ValueError(f"FM {run.fm_version} is not a SOLARIS foundation model")
    return fm


def user_vectors(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The FM's user vector of every user of the shard the KNN covers (:mod:`.knn_users`): the active users,
    and the users with a pair code fresh during the hour (``pooled``: the only possible neighbours)."""
    from solaris.models.fm import user_vectors as fm_user_vectors

    users = UserShard(shard, shard_count(run, USER_SHARDS))
    with timed({"shard": shard}) as meta:
        start = run.interval_start
        fresh = fresh_codes(code_log(settings, run), start, run.params.ttl_hours, with_codes=False, users=users)
        pooled = np.unique(fresh.user_ids)
        active = knn_users.active_users(event_log(settings), start, run.params.knn_lookback_hours)
        ids = np.union1d(active[users.holds(active)], pooled)
        vectors = fm_user_vectors(pinned_fm(run, settings), ids)
        table = pa.table(
            {
                "user_id": pa.array(ids, pa.int64()),
                "vector": pa.FixedSizeListArray.from_arrays(pa.array(vectors.ravel()), vectors.shape[1]),
                "pooled": pa.array(np.isin(ids, pooled)),
            }
        )
        meta["rows"] = step_staging(settings, run, "user_vectors").write(USER_VECTORS, table, shard)["rows"]
        meta |= {"knn_users": len(ids), "knn_pool": len(pooled)}
    return meta


def knn_index(run: HourRun, settings: Settings) -> Meta:
    """The hour's one KNN index, over the pooled users' FM vectors (every shard's), for the shards to search."""
    with timed({}) as meta:
        stage = step_staging(settings, run, "knn_index")
        ids, vectors, pooled = user_vector_arrays(stage.read(USER_VECTORS))
        built = index_pool(ids, vectors, pool=ids[pooled])
        index = {
            "index": pa.array([built.to_bytes()], pa.large_binary()),
            "pool_ids": pa.array([built.pool_ids], pa.large_list(pa.int64())),
        }
        stage.write(KNN_INDEX, pa.table(index))
        meta["rows"] = len(built.pool_ids)
    return meta


def knn_search(run: HourRun, settings: Settings, shard: int) -> Meta:
    """The shard's users' ``knn_k`` nearest pooled users, searched in the hour's one index."""
    with timed({"shard": shard}) as meta:
        stage = step_staging(settings, run, "knn_search")
        ids, vectors, _ = user_vector_arrays(stage.read(USER_VECTORS, shard))
        index = stage.read(KNN_INDEX)
        pool = PoolIndex.from_bytes(index["index"][0].as_py(), index["pool_ids"][0].values.to_numpy())
        found = search_pool(pool, ids, vectors, run.params.knn_k)
        meta[DEGENERATE["user"]] = int(degenerate(vectors).sum())
        k = found.k
        rows = {
            "user_id": pa.array(found.user_ids, pa.int64()),
            "neighbour_ids": pa.FixedSizeListArray.from_arrays(pa.array(found.neighbour_ids.ravel()), k),
            "similarities": pa.FixedSizeListArray.from_arrays(pa.array(found.similarities.ravel()), k),
        }
        meta["rows"] = stage.write(NEIGHBOUR_ROWS, pa.table(rows), shard)["rows"]
    return meta


def user_vector_arrays(table: pa.Table) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """(user ids, vectors, pooled) of staged user vectors, by user id."""
    table = table.sort_by("user_id")
    ids = table["user_id"].to_numpy()
    dim = table.schema.field("vector").type.list_size
    vectors = pc.list_flatten(table["vector"]).to_numpy().reshape(len(ids), dim)
    return ids, vectors, table["pooled"].to_numpy(zero_copy_only=False)


def neighbour_rows(table: pa.Table) -> NeighbourTable:
    """Every shard's searched rows as one table, by user id, as one search leaves them."""
    table = table.sort_by("user_id")
    ids = table["user_id"].to_numpy()
    k = table.schema.field("neighbour_ids").type.list_size
    return NeighbourTable(
        ids,
        pc.list_flatten(table["neighbour_ids"]).to_numpy().reshape(len(ids), k),
        pc.list_flatten(table["similarities"]).to_numpy().reshape(len(ids), k),
    )


def neighbours(run: HourRun, settings: Settings) -> Meta:
    """The hour's user KNN table to the store, a user shard at a time: each covered user's ``knn_k`` nearest
    pooled users, one index per embedding version per hour (the pool changes every hour). Only rows that
    differ from the last run's go to the store, all of them every ``knn_rebuild_hours``, so a row lives that
    long. A user whose vector is zero or non-finite got an empty row from ``knn_search`` (which counts it)."""
    with timed({}) as meta, open_configured_store(settings) as store:
        stage = step_staging(settings, run, "neighbours")
        folder, count = knn_state_dir(settings, run), shard_count(run, USER_SHARDS)
        meta |= {"neighbours_written": 0, "knn_rows_written": 0, "knn_full_rewrite": 0}
        for shard in range(count):
            built = neighbour_rows(stage.read(NEIGHBOUR_ROWS, shard))
            written = _write_shard_rows(run, store, folder, UserShard(shard, count), built)
            meta["neighbours_written"] += written["neighbours_written"]
            meta["knn_rows_written"] += written["knn_rows_written"]
            meta["knn_full_rewrite"] |= written["knn_full_rewrite"]  # 1: some shard rewrote all its rows
        knn_state.prune(folder, run.interval_start - timedelta(hours=1))
    return meta


def _write_shard_rows(run: HourRun, store: FeatureStore, folder: Path, users: UserShard, built: NeighbourTable) -> Meta:
    """A shard's rows that changed since its last state (all of them when a full rewrite is due), then its
    new state, saved only once the store holds them."""
    p, start = run.params, run.interval_start
    previous = knn_state.load_before(folder, start, users)
    full = (
        previous is None
        or previous.table.k != p.knn_k
        or (start - previous.full_built_at >= timedelta(hours=p.knn_rebuild_hours))
    )
    rows, built_at = built.user_ids, start
    if not full:
        rows, built_at = _rewritten_rows(previous.table, built), previous.full_built_at
    part = built.rows(rows)
    written = store.write_user_neighbours(
        run.run_key,
        run.embedding_version,
        part.user_ids,
        part.neighbour_ids,
        part.similarities,
        start,
        start + timedelta(hours=p.knn_rebuild_hours),
    )
    knn_state.save(folder, start, users, knn_state.KnnState(built, built_at))
    return {"neighbours_written": written, "knn_rows_written": len(rows), "knn_full_rewrite": int(full)}


def item_neighbours(run: HourRun, settings: Settings) -> Meta:
    """The hour's item neighbour table, the A2A tier's (:mod:`.similar_items`): each catalogue item's ``a2a_k``
    most similar items among those with a fresh pair code, by the FM's item vector, every row rewritten
    each hour and fresh as long as the pair codes it points to. An item whose vector is zero or non-finite
    gets an empty list and is on none (counted)."""
    from solaris.models.fm import item_vectors

    with timed({}) as meta, open_configured_store(settings) as store:
        start, p = run.interval_start, run.params
        pool = np.unique(fresh_codes(code_log(settings, run), start, p.ttl_hours, with_codes=False).item_ids)
        ids = np.union1d(similar_items.catalogue(event_log(settings)), pool)
        vectors = item_vectors(pinned_fm(run, settings), ids)
        built = build_neighbours(ids, vectors, p.a2a_k, pool=pool)
        meta["item_neighbours_written"] = store.write_item_neighbours(
            run.run_key,
            run.embedding_version,
            built.user_ids,
            built.neighbour_ids,
            built.similarities,
            start,
            run.expires_at,
        )
        meta |= {"a2a_pool": len(pool), DEGENERATE["item"]: int(degenerate(vectors).sum())}
    return meta


def _rewritten_rows(previous: NeighbourTable, built: NeighbourTable) -> np.ndarray:
    """Users whose row is new or differs from last run's: only those go to the store."""
    if not len(previous.user_ids):
        return built.user_ids
    pos = np.searchsorted(previous.user_ids, built.user_ids).clip(max=len(previous.user_ids) - 1)
    same = previous.user_ids[pos] == built.user_ids
    same &= (previous.neighbour_ids[pos] == built.neighbour_ids).all(axis=1)
    same &= (previous.similarities[pos] == built.similarities).all(axis=1)
    return built.user_ids[~same]
