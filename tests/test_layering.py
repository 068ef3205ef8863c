"""The package's layering, read from the source: no import cycle among ``solaris``'s subpackages and
top-level modules, and no producer importing its consumer. Function-level imports count too: a lazy import
hides a cycle from Python, not from a reader."""

from __future__ import annotations

import ast
from collections.abc import Mapping
from pathlib import Path

import solaris

ROOT = Path(solaris.__file__).parent
FORBIDDEN = {("precompute", "serving"), ("precompute", "eval"), ("store", "models"), ("embedding_version", "*")}


def unit_of(module: str) -> str | None:
    """``solaris.store.base`` -> ``store``; anything outside the package -> None."""
    parts = module.split(".")
    return parts[1] if parts[0] == "solaris" and len(parts) > 1 else None


def import_graph(root: Path = ROOT) -> dict[str, dict[str, set[str]]]:
    """unit -> imported unit -> the files that import it."""
    graph: dict[str, dict[str, set[str]]] = {}
    for path in sorted(root.rglob("*.py")):
        source = unit_of(".".join(("solaris", *path.relative_to(root).with_suffix("").parts)))
        for node in ast.walk(ast.parse(path.read_text(), str(path))):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                names = [f"{node.module}.{a.name}" if node.module == "solaris" else node.module for a in node.names]
            else:
                continue
            for target in filter(None, map(unit_of, names)):
                if source and target != source:
                    graph.setdefault(source, {}).setdefault(target, set()).add(path.name)
    return graph


def cycles(graph: Mapping[str, Mapping[str, object]]) -> list[tuple[str, str]]:
    """Every edge a -> b where b also reaches a."""

    def reaches(start: str, goal: str) -> bool:
        seen, todo = set(), [start]
        while todo:
            unit = todo.pop()
            if unit == goal:
                return True
            if unit not in seen:
                seen.add(unit)
                todo.extend(graph.get(unit, {}))
        return False

    return sorted((a, b) for a, targets in graph.items() for b in targets if reaches(b, a))


def test_no_import_cycle_among_subpackages() -> None:
    graph = import_graph()
    assert {"precompute", "serving", "store", "models", "training", "tracking"} <= set(graph)
    assert cycles(graph) == [], {f"{a} -> {b}": sorted(graph[a][b]) for a, b in cycles(graph)}


def test_no_producer_imports_its_consumer() -> None:
    graph = import_graph()
    found = [
        f"{a} -> {b} ({', '.join(sorted(files))})"
        for a, targets in graph.items()
        for b, files in targets.items()
        if (a, b) in FORBIDDEN or (a, "*") in FORBIDDEN
    ]
    assert found == []


def test_the_cycle_check_sees_a_cycle_and_a_lazy_import(tmp_path: Path) -> None:
    """Break the rule on purpose: two subpackages importing each other, one of them inside a function."""
    for unit, body in (
        ("models", "from solaris.tracking import versions\n"),
        ("tracking", "def load():\n    from solaris.models import vm\n"),
    ):
        (tmp_path / unit).mkdir()
        (tmp_path / unit / "__init__.py").write_text(body)
    graph = import_graph(tmp_path)
    assert cycles(graph) == [("models", "tracking"), ("tracking", "models")]
