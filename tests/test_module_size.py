"""No Python module under solaris/, bench/, dags/ or ablations/ longer than 400 lines: a module a newcomer can
read whole, in one sitting. A module that outgrows it holds more than one concern; split it by concern."""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
FOLDERS = ("solaris", "bench", "dags", "ablations")
MAX_LINES = 400


def test_no_module_longer_than_the_limit() -> None:
    lengths = {path: len(path.read_text().splitlines()) for folder in FOLDERS for path in (ROOT / folder).rglob("*.py")}
    too_long = sorted(f"{path.relative_to(ROOT)}: {n} lines" for path, n in lengths.items() if n > MAX_LINES)
    assert not too_long, f"modules longer than {MAX_LINES} lines, to split by concern:\n" + "\n".join(too_long)
