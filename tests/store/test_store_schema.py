"""The store's DDL is compiled from one declaration (``solaris/store/tables.py``): run twice, as every
``init_schema`` does, it makes exactly the declared tables, keys, indexes and (PostgreSQL) partitioning, and
a store made before a column existed gains it."""

from __future__ import annotations

import re
import uuid
from pathlib import Path

import pytest
import sqlalchemy as sa

from solaris.store import FeatureStore, PostgresStoreConfig, SqliteStoreConfig, open_store
from solaris.store.errors import StoreNotInitialised
from solaris.store.sql_store import EXPIRING_TABLES
from solaris.store.sqlfiles import DIALECTS, sql_files
from solaris.store.tables import build_metadata, schema_statements


def describe(engine: sa.Engine, schema: str | None) -> dict[str, object]:
    inspector = sa.inspect(engine)
    tables = {}
    for name in inspector.get_table_names(schema=schema):
        columns = [
            (c["name"], c["type"].compile(dialect=engine.dialect), c["nullable"])
            for c in inspector.get_columns(name, schema=schema)
        ]
        indexes = sorted((i["name"], tuple(i["column_names"])) for i in inspector.get_indexes(name, schema=schema))
        pk = inspector.get_pk_constraint(name, schema=schema)["constrained_columns"]
        tables[name] = (columns, pk, indexes)
    return tables


def sqlite_engine(path: Path) -> sa.Engine:
    return sa.create_engine(f"sqlite:///{path}")


def run_ddl(conn: sa.Connection) -> None:
    for _ in range(2):  # idempotent: every store open with init runs it
        for statement in schema_statements(conn.dialect):
            conn.exec_driver_sql(statement)


def test_sqlite_ddl_matches_metadata(tmp_path: Path) -> None:
    from_files, from_metadata = sqlite_engine(tmp_path / "files.db"), sqlite_engine(tmp_path / "md.db")
    with from_files.begin() as conn:
        run_ddl(conn)
    build_metadata("sqlite").create_all(from_metadata)
    described = describe(from_files, None)
    assert set(described) == set(build_metadata("sqlite").tables)
    assert described == describe(from_metadata, None)


@pytest.mark.postgres
def test_postgresql_ddl_matches_metadata(pg_url: str) -> None:
    engine = sa.create_engine(pg_url)
    files, mirror = f"f_{uuid.uuid4().hex[:8]}", f"m_{uuid.uuid4().hex[:8]}"
    try:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"CREATE SCHEMA {files}; CREATE SCHEMA {mirror}")
            conn.exec_driver_sql(f"SET LOCAL search_path = {files}")
            run_ddl(conn)
        metadata = build_metadata("postgresql")
        metadata.create_all(engine.execution_options(schema_translate_map={None: mirror}))
        described = describe(engine, files)
        assert set(described) == set(metadata.tables)
        assert described == describe(engine, mirror)
        with engine.connect() as conn:
            partitioned = (
                conn.exec_driver_sql(
                    "SELECT n.nspname FROM pg_partitioned_table p JOIN pg_class c ON c.oid = p.partrelid "
                    "JOIN pg_namespace n ON n.oid = c.relnamespace WHERE c.relname = 'pair_embeddings' "
                    f"AND n.nspname IN ('{files}', '{mirror}')"
                )
                .scalars()
                .all()
            )
        assert sorted(partitioned) == sorted([files, mirror])
    finally:
        with engine.begin() as conn:
            conn.exec_driver_sql(f"DROP SCHEMA IF EXISTS {files} CASCADE; DROP SCHEMA IF EXISTS {mirror} CASCADE")
        engine.dispose()


def test_no_sql_file_is_dead() -> None:
    """Every file under solaris/store/sql/<dialect>/ is named by the store's code (a missing one fails the
    other tests)."""
    code = "\n".join(p.read_text() for p in (Path(__file__).parents[2] / "solaris" / "store").glob("*.py"))
    named = set(re.findall(r'"(\w+)"', code)) | {f"expire_{t}" for t in EXPIRING_TABLES}
    for dialect in DIALECTS:
        stems = [r.name.removesuffix(".sql") for r in sql_files(dialect).iterdir() if r.name.endswith(".sql")]
        assert stems, f"{dialect}: no SQL files found"
        unused = sorted(s for s in stems if s not in named)
        assert not unused, f"{dialect}: SQL files no code runs: {unused}"


@pytest.mark.parametrize("column", ["figures", "reason", "selector", "selector_reason"])
def test_a_store_made_before_a_run_record_column_gains_it(store: FeatureStore, column: str) -> None:
    engine = store.engine  # type: ignore[attr-defined]
    with engine.begin() as conn:
        conn.exec_driver_sql(f"ALTER TABLE precompute_runs DROP COLUMN {column}")

    store.init_schema()

    assert column in {c["name"] for c in sa.inspect(engine).get_columns("precompute_runs")}


def test_a_database_without_the_tables_is_named_not_initialised(
    backend: str, request: pytest.FixtureRequest, tmp_path: Path
) -> None:
    if backend == "sqlite":
        config: SqliteStoreConfig | PostgresStoreConfig = SqliteStoreConfig(tmp_path / "empty.db")
    else:
        config = PostgresStoreConfig(request.getfixturevalue("pg_url"), schema=f"e_{uuid.uuid4().hex[:10]}")
    with open_store(config) as store:
        assert not store.initialised()
        with pytest.raises(StoreNotInitialised, match="`solaris store init` creates them"):
            store.check_initialised()
        store.init_schema()
        assert store.initialised()
        store.check_initialised()
        with store.engine.begin() as conn:  # type: ignore[attr-defined]
            conn.exec_driver_sql("DROP TABLE precompute_runs")
        assert not store.initialised()  # one table missing is not a store either
        if isinstance(config, PostgresStoreConfig):
            with store.engine.begin() as conn:  # type: ignore[attr-defined]
                conn.exec_driver_sql(f'DROP SCHEMA "{config.schema}" CASCADE')
