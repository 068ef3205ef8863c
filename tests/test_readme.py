"""The README is the user's entry point: short, its layout table true of the tree, its links alive."""

from __future__ import annotations

import re
import subprocess
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
README = (REPO / "README.md").read_text()
MAX_LINES = 250


def layout_paths() -> list[str]:
    """Every path the Layout table's first column names."""
    table = README.split("## Layout", 1)[1].split("\n## ", 1)[0]
    return [p for row in re.findall(r"^\| (.+?) \|", table, re.M) for p in re.findall(r"`([^`]+)`", row)]


def test_the_readme_is_how_to_use_it_not_a_notebook() -> None:
    assert len(README.splitlines()) <= MAX_LINES


def test_every_path_in_the_layout_exists() -> None:
    paths = layout_paths()
    assert len(paths) > 20
    assert [p for p in paths if not (REPO / p.rstrip("/")).exists()] == []


def test_every_part_of_the_package_is_in_the_layout() -> None:
    named = set(layout_paths())
    parts = [
        f"solaris/{p.name}/" if p.is_dir() else f"solaris/{p.name}"
        for p in (REPO / "solaris").iterdir()
        if (p.is_dir() and (p / "__init__.py").exists()) or (p.suffix == ".py" and p.name != "__init__.py")
    ]
    tracked = subprocess.run(["git", "ls-files"], cwd=REPO, capture_output=True, text=True, check=True).stdout
    top = sorted({f"{path.split('/')[0]}/" for path in tracked.splitlines() if "/" in path and path[0] != "."})
    missing = [p for p in parts + top if p not in named and not any(n.startswith(p) for n in named)]
    assert missing == [], f"add to the README's Layout: {missing}"


def test_every_relative_link_resolves() -> None:
    for doc in [REPO / "README.md", *sorted((REPO / "docs").glob("*.md"))]:
        for target in re.findall(r"\]\(([^)#:]+)(?:#[^)]*)?\)", doc.read_text()):
            assert (doc.parent / target).exists(), f"{doc.name} links to {target}, which does not exist"
