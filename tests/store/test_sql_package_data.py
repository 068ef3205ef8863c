"""The store's SQL ships in the wheel as package data, and an installed package loads it from there.

The wheel is built from a copy of the package sources (never in the checkout, where others run tests), then
unpacked; a child process imports ``solaris`` from the unpacked wheel, away from the checkout, and loads
every statement of both dialects through :mod:`importlib.resources`.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

from solaris.store.sqlfiles import DIALECTS, load_sql

REPO = Path(__file__).resolve().parents[2]
PACKAGE_SQL = "solaris/store/sql"
BUILD_TIMEOUT_S = 300

LOAD_ALL = """
import json, sys
from solaris.store import sqlfiles
loaded = {d: {r.name[:-4]: sqlfiles.load_sql(d, r.name[:-4]) for r in sqlfiles.sql_files(d).iterdir()
              if r.name.endswith(".sql")} for d in sqlfiles.DIALECTS}
migrations = {d: len(sqlfiles.statements(d, "migrate")) for d in sqlfiles.DIALECTS}
json.dump({"module": sqlfiles.__file__, "loaded": loaded, "migrations": migrations}, sys.stdout)
"""


def _source_sql() -> dict[str, dict[str, str]]:
    """The SQL files in the checkout, per dialect: name -> text."""
    root = REPO / PACKAGE_SQL
    return {d: {p.stem: p.read_text(encoding="utf-8") for p in sorted((root / d).glob("*.sql"))} for d in DIALECTS}


def _build_wheel(tmp_path: Path) -> Path:
    src = tmp_path / "src"
    src.mkdir()
    for name in ("pyproject.toml", "README.md"):
        shutil.copy2(REPO / name, src / name)
    shutil.copytree(REPO / "solaris", src / "solaris", ignore=shutil.ignore_patterns("__pycache__", "*.pyc"))
    out = tmp_path / "wheels"
    done = subprocess.run(
        [
            sys.executable,
            "-m",
            "pip",
            "wheel",
            "--no-deps",
            "--no-build-isolation",
            "--no-cache-dir",
            "-q",
            "-w",
            str(out),
            str(src),
        ],
        capture_output=True,
        text=True,
        timeout=BUILD_TIMEOUT_S,
        cwd=tmp_path,
    )
    assert done.returncode == 0, done.stderr[-3000:]
    [wheel] = out.glob("solaris-*.whl")
    return wheel


def test_the_checkout_has_the_sql_in_the_package() -> None:
    from solaris.store.sqlfiles import sql_files

    sources = _source_sql()
    assert all(sources[d] for d in DIALECTS), f"no SQL under {PACKAGE_SQL}/<dialect>/"
    assert {"migrate", "start_run", "recent_runs"} <= set(sources["sqlite"]) & set(sources["postgresql"])
    for dialect, by_name in sources.items():  # what the store loads is what the package folder holds
        assert Path(str(sql_files(dialect))).resolve() == REPO / PACKAGE_SQL / dialect
        assert all(load_sql(dialect, name) == text for name, text in by_name.items())


def test_the_wheel_ships_every_sql_file_and_loads_it_without_the_checkout(tmp_path: Path) -> None:
    wheel = _build_wheel(tmp_path)
    sources = _source_sql()

    with zipfile.ZipFile(wheel) as archive:
        shipped = {n for n in archive.namelist() if n.endswith(".sql")}
        archive.extractall(tmp_path / "installed")
    assert {f"{PACKAGE_SQL}/{d}/migrate.sql" for d in DIALECTS} <= shipped, sorted(shipped)
    assert shipped == {f"{PACKAGE_SQL}/{d}/{name}.sql" for d, by_name in sources.items() for name in by_name}

    # Import solaris from the unpacked wheel: PYTHONPATH comes before the editable install's finder.
    installed = tmp_path / "installed"
    done = subprocess.run(
        [sys.executable, "-c", LOAD_ALL],
        capture_output=True,
        text=True,
        timeout=120,
        cwd=tmp_path,
        env={"PYTHONPATH": str(installed), "PATH": "/usr/bin:/bin"},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    found = json.loads(done.stdout)
    assert Path(found["module"]).is_relative_to(installed), found["module"]
    assert found["loaded"] == sources  # every statement of both dialects, read from the installed package
    assert all(n > 0 for n in found["migrations"].values())
