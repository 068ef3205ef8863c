"""Loads the SQL the store runs from ``solaris/store/sql/<dialect>/<name>.sql``, so the files are the only copy of it.

The files are package data (``pyproject.toml``): they are read through :mod:`importlib.resources`, so an
installed wheel finds them as a checkout does, wherever the package lives.
"""

from __future__ import annotations

from functools import cache
from importlib.resources import files
from importlib.resources.abc import Traversable

DIALECTS = ("sqlite", "postgresql")


def sql_files(dialect: str) -> Traversable:
    """The folder of ``dialect``'s SQL files inside the installed package."""
    if dialect not in DIALECTS:
        raise ValueError(f"no SQL for dialect {dialect!r}; expected one of {', '.join(DIALECTS)}")
    return files("solaris.store") / "sql" / dialect


@cache
def load_sql(dialect: str, name: str) -> str:
    resource = sql_files(dialect) / f"{name}.sql"
    if not resource.is_file():
        raise FileNotFoundError(f"{resource}: the store needs this SQL file (package data of solaris.store)")
    return resource.read_text(encoding="utf-8")


def statements(dialect: str, name: str) -> list[str]:
    """The ``;``-terminated statements of a multi-statement file (migrations, session settings), comments dropped."""
    lines = [ln for ln in load_sql(dialect, name).splitlines() if not ln.lstrip().startswith("--")]
    return [s.strip() for s in "\n".join(lines).split(";") if s.strip()]
