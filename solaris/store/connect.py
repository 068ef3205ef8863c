"""Opening a store from a URL, a typed config, or an Airflow connection id."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from sqlalchemy.engine import URL

from solaris.store.base import FeatureStore
from solaris.store.config import PostgresStoreConfig, SqliteStoreConfig, StoreConfig, parse_store_url

if TYPE_CHECKING:
    from solaris.config import Settings


def open_store(url_or_config: str | StoreConfig, *, init: bool = False) -> FeatureStore:
    """The backend the URL or config names; ``init`` creates missing tables first."""
    config = parse_store_url(url_or_config) if isinstance(url_or_config, str) else url_or_config
    store: FeatureStore
    if isinstance(config, SqliteStoreConfig):
        from solaris.store.sqlite import SqliteFeatureStore

        store = SqliteFeatureStore(config)
    elif isinstance(config, PostgresStoreConfig):
        from solaris.store.postgres import PostgresFeatureStore

        store = PostgresFeatureStore(config)
    else:
        raise TypeError(f"not a store URL or config: {url_or_config!r}")
    if init:
        store.init_schema()
    return store


def url_from_connection(conn: Any) -> str:
    """A store URL from an Airflow Connection (types ``postgres`` and ``sqlite``; host is the SQLite path)."""
    if conn.conn_type == "sqlite":
        if not conn.host:
            raise ValueError(f"Airflow connection {conn.conn_id!r}: a sqlite connection needs host=<file path>")
        return f"sqlite:///{conn.host}"
    if conn.conn_type in ("postgres", "postgresql"):
        query = {"schema": conn.extra_dejson["schema"]} if "schema" in conn.extra_dejson else {}
        url = URL.create(
            "postgresql+psycopg",
            username=conn.login or None,
            password=conn.password or None,
            host=conn.host or None,
            port=conn.port or None,
            database=conn.schema or None,
            query=query,
        )
        return url.render_as_string(hide_password=False)
    raise ValueError(f"Airflow connection {conn.conn_id!r} has type {conn.conn_type!r}; expected postgres or sqlite")


def store_from_airflow_connection(conn_id: str, *, init: bool = False) -> FeatureStore:
    from airflow.sdk import Connection  # Airflow stays out of the import path of everything else.

    return open_store(url_from_connection(Connection.get(conn_id)), init=init)


def open_configured_store(settings: Settings, *, init: bool = False) -> FeatureStore:
    """The store the settings name: ``SOLARIS_STORE_CONN_ID`` (an Airflow connection) wins over the URL."""
    if settings.store_conn_id:
        return store_from_airflow_connection(settings.store_conn_id, init=init)
    return open_store(settings.store_url, init=init)
