"""One typed config per backend, and the URL each is chosen by (``sqlite:///…``, ``postgresql+psycopg://…``)."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

from sqlalchemy.engine import URL, make_url
from sqlalchemy.exc import ArgumentError


@dataclass(frozen=True)
class SqliteStoreConfig:
    path: Path
    busy_timeout_ms: int = 30_000
    # Per-connection page cache; SQLite's 2 MB default makes serving reads page through the OS cache.
    cache_mb: int = 256

    @property
    def url(self) -> str:
        return f"sqlite:///{self.path}"


@dataclass(frozen=True)
class PostgresStoreConfig:
    url: str
    # Tables live in this schema (created if missing); None uses the server's search_path.
    schema: str | None = None
    pool_size: int = 10

    def __post_init__(self) -> None:
        if self.schema is not None and not self.schema.replace("_", "").isalnum():
            raise ValueError(f"PostgreSQL schema {self.schema!r}: use letters, digits and underscores only")


StoreConfig = SqliteStoreConfig | PostgresStoreConfig


def parse_store_url(url: str) -> StoreConfig:
    try:
        parsed: URL = make_url(url)
    except ArgumentError as exc:
        raise ValueError(f"store URL {url!r} is not a database URL: {exc}") from None
    if parsed.drivername == "sqlite":
        if not parsed.database or parsed.database == ":memory:":
            raise ValueError(f"store URL {url!r}: SQLite needs a file path (sqlite:///path/to/store.db)")
        return SqliteStoreConfig(Path(parsed.database))
    if parsed.drivername in ("postgresql", "postgresql+psycopg"):
        schema = parsed.query.get("schema")
        base = parsed.set(drivername="postgresql+psycopg").difference_update_query(["schema"])
        return PostgresStoreConfig(base.render_as_string(hide_password=False), schema=schema)
    raise ValueError(f"store URL {url!r}: expected sqlite:///<path> or postgresql+psycopg://<user>@<host>/<db>")
