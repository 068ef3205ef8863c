"""Feast's side of bench_feast.py, run in its own virtual environment (``.venv-feast``, made by ``make
bench-setup``): Feast pins pandas below 3, which the project's own environment has, so the two cannot share one.

Builds a Feast repository in the given folder (local registry, SQLite online store), writes the pairs as one
feature view keyed by (user, item) with the vector as the same float16 bytes the store keeps, then answers
requests on stdin: a line ``start stop`` times ``get_online_features`` for those requests, one at a time, and
prints one JSON line of latencies in milliseconds and found rows. Timed inside this process, so the pipe is not
in Feast's figure.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
from feast import Entity, FeatureStore, FeatureView, Field, FileSource, ValueType
from feast.infra.online_stores.sqlite import SqliteOnlineStoreConfig
from feast.repo_config import RepoConfig
from feast.types import Bytes

WRITE_BATCH = 100_000


def feature_store(workdir: Path) -> FeatureStore:
    config = RepoConfig(
        project="bench",
        registry=str(workdir / "registry.db"),
        provider="local",
        online_store=SqliteOnlineStoreConfig(path=str(workdir / "online.db")),
        entity_key_serialization_version=3,
    )
    store = FeatureStore(config=config)
    user = Entity(name="user", join_keys=["user_id"], value_type=ValueType.INT64)
    item = Entity(name="item", join_keys=["item_id"], value_type=ValueType.INT64)
    pairs = FeatureView(
        name="pairs",
        entities=[user, item],
        schema=[Field(name="vector", dtype=Bytes)],
        # Never read offline: online writes and reads need a declared source all the same.
        source=FileSource(path=str(workdir / "pairs.parquet"), timestamp_field="event_timestamp"),
        ttl=timedelta(hours=4),
        online=True,
    )
    store.apply([user, item, pairs])
    return store


def write_pairs(store: FeatureStore, pairs: np.lib.npyio.NpzFile, created_at: datetime) -> float:
    started = time.perf_counter()
    users, items, vectors = pairs["users"], pairs["items"], pairs["vectors"]
    for start in range(0, len(users), WRITE_BATCH):
        part = slice(start, start + WRITE_BATCH)
        frame = pd.DataFrame(
            {
                "user_id": users[part],
                "item_id": items[part],
                "vector": [row.tobytes() for row in vectors[part]],
                "event_timestamp": created_at,
            }
        )
        store.write_to_online_store("pairs", frame)
    return time.perf_counter() - started


def serve(store: FeatureStore, requests: np.lib.npyio.NpzFile) -> None:
    users, candidates = requests["users"], requests["candidates"]
    for line in sys.stdin:
        start, stop = map(int, line.split())
        ms, found = [], []
        for user, items in zip(users[start:stop].tolist(), candidates[start:stop].tolist(), strict=True):
            started = time.perf_counter()
            rows = store.get_online_features(
                features=["pairs:vector"], entity_rows=[{"user_id": user, "item_id": item} for item in items]
            ).to_dict()
            ms.append((time.perf_counter() - started) * 1e3)
            found.append(sum(vector is not None for vector in rows["vector"]))
        print(json.dumps({"ms": ms, "found": found}), flush=True)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("workdir", type=Path)
    parser.add_argument("pairs", type=Path, help=".npz of users, items and float16 vectors")
    parser.add_argument("requests", type=Path, help=".npz of users and candidates (one row per request)")
    parser.add_argument("--created-at", type=datetime.fromisoformat, required=True, help="the pairs' write time")
    args = parser.parse_args()
    store = feature_store(args.workdir)
    write_s = write_pairs(store, np.load(args.pairs), args.created_at)
    print(json.dumps({"write_s": write_s}), flush=True)
    serve(store, np.load(args.requests))
    return 0


if __name__ == "__main__":
    sys.exit(main())
