"""The SOLARIS page as a browser renders it: Debian's headless Chromium loads it from a real HTTP server.

The app is mounted at ``/solaris`` under a parent app, as Airflow's api-server mounts it. Without chromium the
test skips, except under ``CI=true`` where it fails: ``.ci/run`` installs it, so CI never passes without it.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import struct
import subprocess
import threading
import time
from collections.abc import Callable, Iterator
from html.parser import HTMLParser
from pathlib import Path

import pytest
import uvicorn
from fastapi import FastAPI
from fastapi.responses import HTMLResponse
from health_world import PAIR_BATCHES, HealthWorld, T, closed_port, register_champion, run_key
from plan_curves import write_plan

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


# A frame of a given width holding the page; once it loaded, the page's own widths are written into the frame's
# parent, where --dump-dom reads them: the layout Chromium really made, measured by the browser.
PROBE = """<!DOCTYPE html><html><body style="margin:0">
<iframe id="page" src="/solaris/" style="width:{width}px;height:800px;border:0"></iframe><pre id="widths"></pre>
<script>
document.getElementById("page").addEventListener("load", () => {{
  const page = document.getElementById("page").contentDocument.documentElement;
  document.getElementById("widths").textContent = JSON.stringify({{
    scroll: page.scrollWidth, viewport: page.clientWidth, charts: page.querySelectorAll("figure.chart svg").length
  }});
}});
</script></body></html>"""


def probe(width: int) -> HTMLResponse:
    return HTMLResponse(PROBE.format(width=width))


@pytest.fixture
def serve() -> Iterator[Serve]:
    """Starts a uvicorn server for an app settings function on a free port; stops it afterwards."""
    servers: list[tuple[uvicorn.Server, threading.Thread]] = []

    def start(settings: Settings) -> str:
        root = FastAPI()
        root.get("/probe", response_class=HTMLResponse)(probe)
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


def _chromium(chromium: str, profile: Path, *args: str) -> list[str]:
    return [chromium, "--headless", "--no-sandbox", "--disable-gpu", f"--user-data-dir={profile}", *args]


def _dump_dom(chromium: str, url: str, profile: Path) -> tuple[str, Rows]:
    """The page's DOM after Chromium loaded it (and ran what it had to run), as text and as table rows."""
    done = subprocess.run(
        _chromium(chromium, profile, "--virtual-time-budget=10000", "--dump-dom", url),
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

    assert f'data-check="latest_run">the latest precompute run {run_key(11)} failed' in text
    assert 'id="status" class="status level-failing"' in text
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


@pytest.mark.parametrize("width", [1280, 600])
def test_the_page_fits_the_window_with_its_charts(
    chromium: str, health_world: HealthWorld, serve: Serve, tmp_path: Path, width: int
) -> None:
    """At 1,280 px every table fits; at 600 a wide table scrolls in its own box, the page never does."""
    register_champion(registry.connect(health_world.settings))
    write_plan(health_world.settings)  # its chart and sentences too
    page = serve(health_world.settings)

    text, _ = _dump_dom(chromium, page.removesuffix("solaris/") + f"probe?width={width}", tmp_path / "profile")

    found = re.search(r'<pre id="widths">(.*?)</pre>', text)
    assert found and found.group(1), "the frame never loaded: " + text[-2000:]
    widths = json.loads(found.group(1))
    assert widths["charts"] == 5 and widths["viewport"] <= width
    assert widths["scroll"] <= widths["viewport"], widths


def test_a_screenshot_at_1280_px(chromium: str, health_world: HealthWorld, serve: Serve, tmp_path: Path) -> None:
    shot = tmp_path / "page.png"

    done = subprocess.run(
        _chromium(
            chromium,
            tmp_path / "profile",
            "--window-size=1280,800",
            f"--screenshot={shot}",
            serve(health_world.settings),
        ),
        capture_output=True,
        text=True,
        timeout=120,
    )

    assert done.returncode == 0 and shot.is_file(), done.stderr[-3000:]
    header = shot.read_bytes()[:24]  # PNG signature, then the IHDR chunk: width and height, big-endian
    assert header[:8] == b"\x89PNG\r\n\x1a\n" and struct.unpack(">II", header[16:24]) == (1280, 800)
