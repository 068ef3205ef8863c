"""Airflow's metadata database for the local stack: PostgreSQL when the server answers, else SQLite.

The database is Airflow's alone (never the feature store's or MLflow's: each keeps an ``alembic_version``).
"""

from __future__ import annotations

import re

import psycopg
from psycopg import sql

DEFAULT_ADMIN_URL = "postgresql+psycopg://postgres@127.0.0.1:5432/postgres"
DEFAULT_DATABASE = "solaris_airflow"
_NAME = re.compile(r"[a-z_][a-z0-9_]{0,62}")


def postgres_metadata_url(admin_url: str, database: str, connect_timeout_s: int = 3) -> str | None:
    """The URL of ``database`` on the server of ``admin_url``, created if missing; None if unreachable.

    ``admin_url`` names a database the user may connect to and a role that may create databases.
    """
    if not admin_url.startswith("postgresql+psycopg://"):
        raise ValueError(f"PostgreSQL admin URL {admin_url!r}: expected postgresql+psycopg://<user>@<host>/<db>")
    if not _NAME.fullmatch(database):
        raise ValueError(f"Airflow database name {database!r}: use lower-case letters, digits and underscores")
    dsn = admin_url.replace("postgresql+psycopg://", "postgresql://", 1)
    try:
        admin = psycopg.connect(dsn, autocommit=True, connect_timeout=connect_timeout_s)
    except psycopg.OperationalError:
        return None
    with admin:
        exists = admin.execute("SELECT 1 FROM pg_database WHERE datname = %s", (database,)).fetchone()
        if exists is None:
            try:
                admin.execute(sql.SQL("CREATE DATABASE {}").format(sql.Identifier(database)))
            except psycopg.errors.DuplicateDatabase:
                pass  # another stack created it meanwhile
    base, _, tail = admin_url.rpartition("/")
    query = tail.partition("?")[1:]
    return f"{base}/{database}{''.join(query)}"
