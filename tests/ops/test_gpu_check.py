"""bench/gpu_check.sh, the GPU path's one-run check, refuses clearly where torch sees no CUDA device."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest
import torch

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "gpu_check.sh"


@pytest.mark.skipif(torch.cuda.is_available(), reason="this machine has CUDA: the script would run for real")
def test_without_cuda_the_check_refuses_before_running_anything(tmp_path: Path) -> None:
    venv = Path(sys.executable).parent.parent  # the venv running the tests
    done = subprocess.run(
        ["bash", str(SCRIPT), "--quick"],
        capture_output=True,
        text=True,
        timeout=120,
        env={"PATH": "/usr/bin:/bin", "SOLARIS_VENV": str(venv), "HOME": str(tmp_path)},
    )
    assert done.returncode != 0
    assert "gpu_check: no CUDA device" in done.stderr and torch.__version__ in done.stderr
    assert "==" not in done.stdout  # neither the bench nor the hourly run started
