"""``make bench-setup`` installs hey through apt-get when it can (as root, or through passwordless sudo), and fails
naming what to do where it cannot: ``make bench`` asked for the HTTP part that needs it."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

import pytest

SCRIPT = Path(__file__).resolve().parents[2] / "bench" / "install_hey.sh"

FAKE_APT_GET = """#!/bin/sh
echo "$@" >> "{calls}"
if [ "$1" = install ]; then printf '#!/bin/sh\\n' > "{bin}/hey" && /bin/chmod +x "{bin}/hey"; fi
"""


# Not root: ``id -u`` answers 1000, and a passwordless sudo runs what it is given.
FAKE_ID = """#!/bin/sh
[ "$1" = -u ] && echo 1000 || /usr/bin/id "$@"
"""
FAKE_SUDO = """#!/bin/sh
echo "sudo $@" >> "{calls}"
[ "$1" = -n ] && shift
"$@"
"""
AS_ROOT_ID = """#!/bin/sh
exec /usr/bin/id "$@"
"""


def fake_bin(tmp_path: Path, **scripts: str) -> str:
    """A PATH of one folder holding ``scripts`` (name -> text): no hey, and no apt-get or sudo but the fakes."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name, text in scripts.items():
        (bin_dir / name.replace("_", "-")).write_text(text.format(calls=tmp_path / "calls", bin=bin_dir))
        (bin_dir / name.replace("_", "-")).chmod(0o755)
    assert subprocess.run(["/bin/sh", "-c", "command -v hey"], env={"PATH": str(bin_dir)}).returncode != 0
    return str(bin_dir)


@pytest.mark.skipif(os.geteuid() != 0, reason="the root path: apt-get runs without sudo")
def test_as_root_it_installs_hey_with_apt_get(tmp_path: Path) -> None:
    bin_dir, calls = tmp_path / "bin", tmp_path / "calls"
    path = fake_bin(tmp_path, apt_get=FAKE_APT_GET, id=AS_ROOT_ID)

    done = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": path}, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0 and "could not be" not in done.stderr, done.stderr
    assert calls.read_text().split("\n")[0] == "install -y -q hey"
    assert (bin_dir / "hey").exists()


def test_as_a_user_with_passwordless_sudo_it_installs_hey_through_sudo(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, apt_get=FAKE_APT_GET, id=FAKE_ID, sudo=FAKE_SUDO)

    done = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": path}, capture_output=True, text=True, timeout=60)

    assert done.returncode == 0, done.stderr
    assert (tmp_path / "calls").read_text().split("\n")[:2] == ["sudo -n true", "sudo -n apt-get install -y -q hey"]
    assert (tmp_path / "bin" / "hey").exists()


def test_where_it_cannot_install_it_fails_naming_what_to_do(tmp_path: Path) -> None:
    path = fake_bin(tmp_path, id=FAKE_ID)  # not root, no sudo

    done = subprocess.run(["/bin/bash", str(SCRIPT)], env={"PATH": path}, capture_output=True, text=True, timeout=60)

    assert done.returncode == 1
    assert "apt-get install hey" in done.stderr and "--duration 0" in done.stderr
