"""``make bench-setup`` installs hey through apt-get when it can (as root here and in CI)."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "install_hey.sh"

FAKE_APT_GET = """#!/bin/sh
echo "$@" >> "{calls}"
if [ "$1" = install ]; then printf '#!/bin/sh\\n' > "{bin}/hey" && chmod +x "{bin}/hey"; fi
"""


@pytest.mark.skipif(os.geteuid() != 0, reason="the root path: apt-get runs without sudo")
def test_as_root_it_installs_hey_with_apt_get(tmp_path: Path) -> None:
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    bin_dir.mkdir()
    apt_get = bin_dir / "apt-get"
    apt_get.write_text(FAKE_APT_GET.format(calls=calls, bin=bin_dir))
    apt_get.chmod(0o755)
    path = f"{bin_dir}:/usr/bin:/bin"
    assert subprocess.run(["sh", "-c", "command -v hey"], env={"PATH": path}).returncode != 0  # not there yet

    done = subprocess.run(["bash", str(SCRIPT)], env={"PATH": path}, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0 and "could not be" not in done.stderr, done.stderr
    assert calls.read_text().split("\n")[0] == "install -y -q hey"
    assert (bin_dir / "hey").exists()
