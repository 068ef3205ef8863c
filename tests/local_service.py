"""Waiting on things the tests start: :func:`poll` until a condition holds, and :func:`serving`, a server
process that the block uses once it answers and that is stopped, with everything it spawned, afterwards."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import pytest

from solaris.ops.health import Check, probe


def poll(
    what: str,
    fetch: Callable[[], Any],
    done: Callable[[Any], bool],
    timeout_s: float,
    explain: Callable[[], str] = lambda: "",
    every_s: float = 2.0,
) -> Any:
    """Call ``fetch`` until ``done(result)``; fail with ``explain()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while True:
        result = fetch()
        if done(result):
            return result
        if time.monotonic() > deadline:
            pytest.fail(f"{what}: not done after {timeout_s:.0f} s (last: {result!r})\n{explain()}")
        time.sleep(every_s)


@contextmanager
def serving(
    name: str, argv: Sequence[str], url: str, log: Path, env: Mapping[str, str] | None = None, timeout_s: float = 120
) -> Iterator[None]:
    """``argv`` in a session of its own, logging to ``log``; the block runs once ``url`` answers 200."""
    with open(log, "wb") as out:
        server = subprocess.Popen(
            list(argv), env=dict(env or os.environ), stdout=out, stderr=out, start_new_session=True
        )

    def answers() -> bool:
        if server.poll() is not None:
            pytest.fail(f"{name} exited with {server.returncode} while starting:\n{log.read_text()[-3000:]}")
        return probe(Check(url))

    try:
        poll(f"{name} answering at {url}", answers, bool, timeout_s, lambda: log.read_text()[-3000:], every_s=0.2)
        yield
    finally:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=60)
