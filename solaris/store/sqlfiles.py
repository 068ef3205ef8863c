"""Loads the SQL the store runs from ``sql/<dialect>/<name>.sql``, so the files are the only copy of it."""

from __future__ import annotations

from functools import cache
from pathlib import Path

SQL_DIR = Path(__file__).resolve().parents[2] / "sql"
DIALECTS = ("sqlite", "postgresql")


@cache
def load_sql(dialect: str, name: str) -> str:
    if dialect not in DIALECTS:
        raise ValueError(f"no SQL for dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    path = SQL_DIR / dialect / f"{name}.sql"
    if not path.is_file():
        raise FileNotFoundError(f"{path}: the store needs this SQL file")
    return path.read_text()


def statements(dialect: str, name: str) -> list[str]:
    """The ``;``-terminated statements of a multi-statement file (the DDL), comments dropped."""
    lines = [ln for ln in load_sql(dialect, name).splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
