"""The SOLARIS page as a browser renders it: Debian's headless Chromium loads it from a real HTTP server.

The app is mounted at ``/solaris`` under a parent app, as Airflow's api-server mounts it. Without chromium the
test skips, except under ``CI=true`` where it fails: ``.ci/run`` installs it, so CI never passes without it.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from health_world import PAIR_BATCHES, HealthWorld, T, closed_port, register_champion, run_key

from solaris.config import Settings
from solaris.monitoring.app import create_app
from solaris.tracking import registry

STARTUP_TIMEOUT_S = 30
Serve = Callable[[Settings], str]  # settings -> the page's URL


@pytest.fixture(scope="session")
def chromium() -> str:
    found = shutil.which("chromium")
    if found is None:
        message = "chromium is not installed (apt-get install chromium; .ci/run installs it)"
        if os.environ.get("CI", "").lower() == "true":
            pytest.fail(message)
        pytest.skip(message)
    return found


class Rows(HTMLParser):
    """Each table row of a page as (the row's attributes, the enclosing table's attributes, its cell texts)."""

    def __init__(self) -> None:
        super().__init__()
        self.rows: list[tuple[dict[str, str], dict[str, str], list[str]]] = []
        self._table: dict[str, str] = {}
        self._cell: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        if tag == "table":
            self._table = {k: v or "" for k, v in attrs}
        elif tag == "tr":
            self.rows.append(({k: v or "" for k, v in attrs}, self._table, []))
        elif tag in ("td", "th"):
            self._cell = []

    def handle_data(self, data: str) -> None:
        if self._cell is not None:
            self._cell.append(data.strip())

    def handle_endtag(self, tag: str) -> None:
        if tag in ("td", "th") and self._cell is not None:
            self.rows[-1][2].append(" ".join(t for t in self._cell if t))
            self._cell = None

    def cells(self, table: dict[str, str] | None = None, row: dict[str, str] | None = None) -> list[list[str]]:
        """Cell texts of the rows whose own and whose table's attributes include ``row`` and ``table``."""
        want_table, want_row = (table or {}).items(), (row or {}).items()
        return [c for a, t, c in self.rows if want_table <= t.items() and want_row <= a.items()]


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts a uvicorn server for an app settings function on a free port; stops it afterwards."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(settings: Settings) -> str:
        root = FastAPI()
        root.mount("/solaris", create_app(settings=lambda: settings, clock=lambda: T))
        server = uvicorn.Server(uvicorn.Config(root, host="127.0.0.1", port=closed_port(), log_level="warning"))
        thread = threading.Thread(target=server.run, daemon=True)
        thread.start()
        servers.append((server, thread))
        deadline = time.monotonic() + STARTUP_TIMEOUT_S
        while not server.started:
            assert thread.is_alive() and time.monotonic() < deadline, "uvicorn did not start"
            time.sleep(0.05)
        return f"http://127.0.0.1:{server.config.port}/solaris/"

    yield start
    for server, thread in servers:
        server.should_exit = True
        thread.join(timeout=STARTUP_TIMEOUT_S)


def _dump_dom(chromium: str, url: str, profile: Path) -> tuple[str, Rows]:
    """The page's DOM after Chromium loaded it, as text and as table rows."""
    done = subprocess.run(
        [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", "--dump-dom", url],
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0 and "</html>" in done.stdout, done.stderr[-3000:]
    rows = Rows()
    rows.feed(done.stdout)
    return done.stdout, rows


def _percent(share: float) -> str:
    return f"{100 * share:.1f}%"


def test_page_in_chromium_shows_versions_rows_runs_and_champion(
    chromium: str, health_world: HealthWorld, serve: Serve, tmp_path: Path
) -> None:
    emb = register_champion(registry.connect(health_world.settings))

    text, page = _dump_dom(chromium, serve(health_world.settings), tmp_path / "profile")

    assert f"precompute run failed:</strong> the latest precompute run {run_key(11)} failed" in text
    champion = {name: version for name, version in page.cells(table={"id": "champion"})}
    assert champion["embedding version"] == emb and champion["FM (solaris-fm)"] == "1"
    vms = [page.cells(table={"id": "vms"}, row={"data-vm": vm}) for vm in ("ctr", "cvr")]
    assert vms == [
        [["ctr (lead)", "solaris-vm-ctr", "1", "1", "1", emb]],
        [["cvr", "solaris-vm-cvr", "1", "1", "1", emb]],
    ]
    [pairs] = page.cells(table={"data-version": emb}, row={"data-table": "pair_embeddings"})
    fresh = sum(b.n for b in PAIR_BATCHES if b.expires_at > T)
    assert pairs[:3] == ["pair_embeddings", str(sum(b.n for b in PAIR_BATCHES)), str(fresh)]
    [run] = page.cells(row={"data-run": run_key(10)})  # a line a run; every count on the run's own page
    figures = health_world.figures[run_key(10)]
    assert run[:3] == ["2026-03-01 10:00", "succeeded", "1 / 1 / 7"] and run[4:6] == ["200", "—"]
    assert run[6:] == [_percent(figures["coverage_any"]), _percent(figures["hit_rate_ttl"]), "all counts"]


def test_page_in_chromium_names_an_unreachable_store(
    chromium: str, health_world: HealthWorld, serve: Serve, tmp_path: Path
) -> None:
    down = health_world.settings.with_overrides(store_url=f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")

    text, _ = _dump_dom(chromium, serve(down), tmp_path / "profile")

    assert "feature store unavailable:" in text and "OperationalError" in text
    assert "Traceback" not in text and 'id="champion"' in text
