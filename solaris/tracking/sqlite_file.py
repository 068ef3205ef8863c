"""Keep this process's MLflow connections on the SQLite file that is on disk now (issue #17 item 11).

MLflow caches, per tracking URI and for the life of the process, a store and a SQLAlchemy engine whose pool
keeps its SQLite connections open. When the database file is deleted or replaced while they are open (a
replay wipes its output folder, MLflow database included, and starts again in the same process: a retried
task under ``dag.test``, a second replay into the same folder), those connections still point at the old,
unlinked file: reads return its stale rows, and the first write fails with "attempt to write a readonly
database" (SQLITE_READONLY_DBMOVED). :func:`follow` runs in every ``registry.connect``: when the file is not
the one this process last saw there, it drops MLflow's engines and stores for the URI, so the next call opens
the file on disk (creating and migrating it if it is new), as a fresh process would.
"""

from __future__ import annotations

import os
from pathlib import Path

from mlflow.store.model_registry.sqlalchemy_store import SqlAlchemyStore as RegistryStore
from mlflow.store.tracking.sqlalchemy_store import SqlAlchemyStore as TrackingStore
from mlflow.tracking._model_registry.registry import ModelRegistryStoreRegistry
from mlflow.tracking._tracking_service.registry import TrackingStoreRegistry

PREFIX = "sqlite:///"
FileId = tuple[int, int]

# MLflow's caches (private, hence named here once: a change of MLflow version that moves them fails loudly).
_ENGINE_MAPS = (TrackingStore._engine_map, RegistryStore._engine_map)
_STORE_CACHES = (
    TrackingStoreRegistry._get_store_with_resolved_uri,
    ModelRegistryStoreRegistry._get_store_with_resolved_uri,
)
_seen: dict[str, FileId] = {}  # URI -> the file this process found there at its last connect


def follow(uri: str) -> None:
    """Make MLflow's next call on ``uri`` (``sqlite:///<path>``) use the file now at the path."""
    path = Path(uri.removeprefix(PREFIX))
    path.parent.mkdir(parents=True, exist_ok=True)
    now = file_id(path)
    if any(uri in engines for engines in _ENGINE_MAPS) and (now is None or _seen.get(uri) != now):
        forget(uri)
    if now is None:
        _seen.pop(uri, None)
    else:
        _seen[uri] = now


def file_id(path: Path) -> FileId | None:
    """(device, inode): a file put in the place of another has a new inode while the old one is still open."""
    try:
        stat = os.stat(path)
    except FileNotFoundError:
        return None
    return stat.st_dev, stat.st_ino


def forget(uri: str) -> None:
    """Close the pooled connections of ``uri``'s engines and drop the stores built on them."""
    for engines in _ENGINE_MAPS:
        engine = engines.pop(uri, None)
        if engine is not None:
            engine.dispose()
    for cache in _STORE_CACHES:
        cache.cache_clear()
