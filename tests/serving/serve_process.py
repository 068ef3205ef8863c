"""`solaris serve` as a real process, for the tests that need uvicorn itself (workers, signals)."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import httpx
from conftest import lay_out

from solaris.config import Settings
from solaris.ops.health import free_ports
from solaris.serving.champion import ServingModel
from solaris.store import SqliteStoreConfig, open_store

READY_WITHIN_S = 120


def laid_out_settings(settings: Settings, champion: ServingModel, folder: Path) -> Settings:
    """``settings`` with a SQLite store under ``folder`` holding the serving tests' layout."""
    with open_store(SqliteStoreConfig(folder / "store.db"), init=True) as store:
        lay_out(store, champion)
    return settings.with_overrides(data_dir=folder / "var", store_url=f"sqlite:///{folder / 'store.db'}")


def start_serve(settings: Settings, *flags: str) -> tuple[subprocess.Popen[bytes], str]:
    """The service in a session of its own (so a test can signal its process group), once /readyz is 200."""
    (port,) = free_ports("127.0.0.1", 1)
    command = [str(Path(sys.executable).parent / "solaris"), "serve", "--port", str(port), *flags]
    server = subprocess.Popen(command, env=os.environ | settings.as_env(), start_new_session=True)
    base = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + READY_WITHIN_S
    try:
        while True:
            assert server.poll() is None, f"solaris serve exited with {server.returncode}"
            try:
                if httpx.get(f"{base}/readyz", timeout=2).status_code == 200:
                    return server, base
            except httpx.TransportError:
                pass
            assert time.monotonic() < deadline, f"the service did not become ready in {READY_WITHIN_S} s"
            time.sleep(0.5)
    except BaseException:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
        raise


def stop_serve(server: subprocess.Popen[bytes], within_s: float = 30.0) -> None:
    """SIGTERM to the service's process group, as `solaris stack down` sends; SIGKILL if it outlives ``within_s``."""
    try:
        os.killpg(server.pid, signal.SIGTERM)
        server.wait(timeout=within_s)
    except ProcessLookupError:
        pass
    except subprocess.TimeoutExpired:
        os.killpg(server.pid, signal.SIGKILL)
        server.wait(timeout=10)
