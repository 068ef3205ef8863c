"""Detached service processes: start each in its own session, find everything it spawned, stop all of it.

A service is started as the leader of a new session (and process group), so a signal to the group reaches
its workers. Some children leave the group (Airflow's task supervisors start their own); they still keep the
session unless they call ``setsid``, and they stay descendants until their parent dies. :func:`members`
therefore takes the union of both, and :func:`stop` snapshots it before signalling, because a dead leader's
orphans are re-parented and can no longer be found by descent.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

import psutil


@dataclass(frozen=True)
class Proc:
    """A started service: its leader's pid and start time (so a recycled pid is never mistaken for it)."""

    name: str
    pid: int
    create_time: float
    log: Path

    def leader(self) -> psutil.Process | None:
        try:
            process = psutil.Process(self.pid)
            if abs(process.create_time() - self.create_time) > 0.01 or process.status() == psutil.STATUS_ZOMBIE:
                return None
            return process
        except psutil.NoSuchProcess:
            return None

    def alive(self) -> bool:
        return self.leader() is not None


def start(name: str, argv: Sequence[str], env: Mapping[str, str], log: Path, cwd: Path) -> Proc:
    """Start ``argv`` detached in a new session, stdout and stderr to ``log`` (begun afresh, so a failure's
    tail is this start's)."""
    log.parent.mkdir(parents=True, exist_ok=True)
    with open(log, "wb") as out:
        child = subprocess.Popen(
            list(argv),
            env=dict(env),
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    return Proc(name, child.pid, psutil.Process(child.pid).create_time(), log)


def members(procs: Iterable[Proc]) -> list[psutil.Process]:
    """Every live process the services started: leaders, their descendants, and their sessions' members."""
    found: dict[int, psutil.Process] = {}
    sessions = set()
    for proc in procs:
        leader = proc.leader()
        if leader is None:
            continue
        sessions.add(proc.pid)  # a session leader's sid is its pid
        for member in [leader, *_descendants(leader)]:
            found[member.pid] = member
    for process in psutil.process_iter():
        try:
            if os.getsid(process.pid) in sessions:
                found.setdefault(process.pid, process)
        except (ProcessLookupError, PermissionError):
            continue
    return [p for p in found.values() if _running(p)]


def stop(procs: Sequence[Proc], timeout_s: float) -> list[psutil.Process]:
    """SIGTERM to each service's group and members, SIGKILL what is left after ``timeout_s``.

    Returns the processes that survived even SIGKILL (empty on success).
    """
    targets = members(procs)
    groups = {_pgid(p) for p in targets} - {None, os.getpgid(0)}
    _signal(targets, groups, signal.SIGTERM)
    alive = _wait_gone(targets, timeout_s)
    if alive:
        _signal(alive, {_pgid(p) for p in alive} - {None, os.getpgid(0)}, signal.SIGKILL)
        alive = _wait_gone(alive, 5.0)
    return alive


def _wait_gone(processes: list[psutil.Process], timeout_s: float) -> list[psutil.Process]:
    """The processes still running after ``timeout_s``; a zombie counts as gone (its parent may never reap
    it where PID 1 is not an init)."""
    deadline = time.monotonic() + timeout_s
    while True:
        psutil.wait_procs(processes, timeout=0)  # reaps those that are our own children
        alive = [p for p in processes if _running(p)]
        if not alive or time.monotonic() >= deadline:
            return alive
        time.sleep(0.1)


def _descendants(process: psutil.Process) -> list[psutil.Process]:
    try:
        return process.children(recursive=True)
    except psutil.NoSuchProcess:
        return []


def _running(process: psutil.Process) -> bool:
    try:
        return process.is_running() and process.status() != psutil.STATUS_ZOMBIE
    except psutil.NoSuchProcess:
        return False


def _pgid(process: psutil.Process) -> int | None:
    try:
        return os.getpgid(process.pid)
    except ProcessLookupError:
        return None


def _signal(processes: Iterable[psutil.Process], groups: Iterable[int | None], sig: signal.Signals) -> None:
    for group in groups:
        try:
            os.killpg(group, sig)  # type: ignore[arg-type]
        except (ProcessLookupError, PermissionError):
            pass
    for process in processes:
        try:
            process.send_signal(sig)
        except psutil.NoSuchProcess:
            pass
