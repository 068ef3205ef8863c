"""The local stack's executor forks its workers with the tasks' code already imported."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

# In a fresh interpreter: this test process has imported torch long since.
CHECK = """
import sys
from solaris.ops.local_executor import PreloadingLocalExecutor
before = "torch" in sys.modules
executor = PreloadingLocalExecutor(parallelism=1)
executor.start()
(pid,) = executor.workers
with open(f"/proc/{pid}/maps") as maps:
    mapped = "libtorch" in maps.read()
executor.end()
print(before, mapped)
"""


def test_workers_fork_with_torch_already_loaded(tmp_path: Path) -> None:
    env = {"AIRFLOW_HOME": str(tmp_path), "PATH": "/usr/bin:/bin"}
    done = subprocess.run([sys.executable, "-c", CHECK], env=env, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    assert done.stdout.split()[-2:] == ["False", "True"]  # not imported by the module, loaded in the worker
