"""``make bench`` runs every bench script though each ends in ``sys.exit(main())``, and fails naming the ones
that failed (a run that stopped after the first script's exit passed for the whole bench)."""

from __future__ import annotations

import shutil
import subprocess
import sys
from pathlib import Path

RUNNER = Path(__file__).resolve().parents[2] / "bench" / "run_all.py"


def test_every_script_runs_and_a_failure_fails_the_run(tmp_path: Path) -> None:
    shutil.copy(RUNNER, tmp_path / "run_all.py")
    for name, code in [("a", 0), ("b", 3), ("c", None)]:
        (tmp_path / f"bench_{name}.py").write_text(
            f"import sys\nprint('ran {name}', sys.argv[1:])\nif __name__ == '__main__':\n    sys.exit({code})\n"
        )
    done = subprocess.run(
        [sys.executable, str(tmp_path / "run_all.py"), "--quick"], capture_output=True, text=True, timeout=60
    )
    assert [line for line in done.stdout.splitlines() if line.startswith("ran")] == [
        "ran a ['--quick']",
        "ran b ['--quick']",
        "ran c ['--quick']",
    ]
    assert done.returncode == 1
    assert "failed: bench_b.py" in done.stderr
