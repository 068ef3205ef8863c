"""The feature store: embedding versions, pair / user-aggregate / neighbour embeddings with a TTL, runs.

``open_store(url)`` picks the backend (``sqlite:///…`` embedded, ``postgresql+psycopg://…`` production).
"""

from solaris.store.base import FeatureStore
from solaris.store.config import PostgresStoreConfig, SqliteStoreConfig, parse_store_url
from solaris.store.connect import open_configured_store, open_store, store_from_airflow_connection, url_from_connection
from solaris.store.errors import StoreError
from solaris.store.records import EmbeddingVersion, RunRecord, TableStats, TierBatchRead, TierRead

__all__ = [
    "EmbeddingVersion",
    "FeatureStore",
    "PostgresStoreConfig",
    "RunRecord",
    "SqliteStoreConfig",
    "StoreError",
    "TableStats",
    "TierBatchRead",
    "TierRead",
    "open_configured_store",
    "open_store",
    "parse_store_url",
    "store_from_airflow_connection",
    "url_from_connection",
]
