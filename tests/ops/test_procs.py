"""Service processes: stop reaches children that left the group or ignore SIGTERM; a recycled pid is not ours."""

from __future__ import annotations

import contextlib
import os
import sys
import time
from pathlib import Path

import psutil

from solaris.ops import procs

# An orphan (its parent subshell exits at once) that leaves the group, as Airflow's task supervisors do, and
# ignores SIGTERM: only the session still ties it to the service.
STUBBORN = (
    "import os, signal, time; os.setpgid(0, 0); signal.signal(signal.SIGTERM, signal.SIG_IGN); "
    "open(os.environ['READY'], 'w').close(); time.sleep(600)"
)


def _wait_for(path: Path, log: Path) -> None:
    for _ in range(300):
        if path.exists():
            return
        time.sleep(0.05)
    raise AssertionError(f"{path} never appeared; log: {log.read_text()!r}")


def test_stop_kills_orphans_outside_the_group_that_ignore_sigterm(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    script = f'({sys.executable} -c "{STUBBORN}" &); exec sleep 600'
    proc = procs.start("svc", ["sh", "-c", script], os.environ | {"READY": str(ready)}, tmp_path / "svc.log", tmp_path)
    try:
        _wait_for(ready, proc.log)
        (child,) = [p for p in procs.members([proc]) if p.pid != proc.pid]
        assert os.getpgid(child.pid) != proc.pid and os.getsid(child.pid) == proc.pid
        assert child not in psutil.Process(proc.pid).children(recursive=True)

        assert procs.stop([proc], timeout_s=1.0) == []
        assert not proc.alive()
        assert not child.is_running() or child.status() == psutil.STATUS_ZOMBIE
    finally:  # whatever stop missed, so a failure leaves nothing behind
        for leftover in [p for p in psutil.process_iter() if _session(p) == proc.pid]:
            with contextlib.suppress(psutil.NoSuchProcess):
                leftover.kill()


def _session(process: psutil.Process) -> int | None:
    try:
        return os.getsid(process.pid)
    except (ProcessLookupError, PermissionError):
        return None


def test_a_recycled_pid_is_not_the_service(tmp_path: Path) -> None:
    proc = procs.start("svc", ["sleep", "600"], os.environ, tmp_path / "svc.log", tmp_path)
    try:
        impostor = procs.Proc("svc", proc.pid, proc.create_time - 5.0, proc.log)
        assert proc.alive() and not impostor.alive() and procs.members([impostor]) == []
    finally:
        procs.stop([proc], timeout_s=5.0)
    assert not proc.alive()
