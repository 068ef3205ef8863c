"""The health app over HTTP (FastAPI's TestClient): the JSON endpoint, the page, and failures as messages."""

from __future__ import annotations

import html
import threading
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from http.server import BaseHTTPRequestHandler, HTTPServer

import pytest
from fastapi.testclient import TestClient
from health_world import FELL_BACK, PAIR_BATCHES, HealthWorld, T, closed_port, register_champion, run_key

from solaris.config import Settings
from solaris.live.clock import CLOCK_ENV, LiveClock
from solaris.live.figures import append_hour, hour_line, load_log_path
from solaris.live.load import LoadStats
from solaris.monitoring.app import create_app, mlflow_unreachable, now
from solaris.tracking import registry


def _client(settings: Settings) -> TestClient:
    return TestClient(create_app(settings=lambda: settings, clock=lambda: T))


def test_health_json(health_world: HealthWorld) -> None:
    emb = register_champion(registry.connect(health_world.settings))

    response = _client(health_world.settings).get("/api/health")

    body = response.json()
    assert body["problems"] == [] and datetime.fromisoformat(body["at"]) == T
    # Every source answered, but the world's latest run failed: not ok (test_run_alerts.py covers the rest).
    assert response.status_code == 503 and not body["ok"]
    assert [(a["run_id"], a["status"]) for a in body["alerts"]] == [(run_key(11), "failed")]
    assert body["champion"] == {"fm": "1", "ae": "1", "vm": "1", "embedding_version": emb, "vm_name": "ctr"}
    chains = {v["vm"]: v["champion"] for v in body["vms"]}  # every configured VM, its own chain
    assert chains == {
        vm: {"fm": "1", "ae": "1", "vm": "1", "embedding_version": emb, "vm_name": vm} for vm in ("ctr", "cvr")
    }
    first = body["versions"][0]
    assert first["version"] == emb and first["champion"]
    pairs = first["tables"]["pair_embeddings"]
    assert pairs["rows"] == sum(b.n for b in PAIR_BATCHES)
    assert pairs["fresh_share"] == pytest.approx(sum(b.n for b in PAIR_BATCHES if b.expires_at > T) / pairs["rows"])
    assert datetime.fromisoformat(pairs["oldest_created_at"]) == min(b.created_at for b in PAIR_BATCHES)
    assert [r["run_id"] for r in body["runs"]] == health_world.run_keys_newest_first
    assert body["runs"][1]["figures"] == health_world.figures[run_key(10)]
    assert body["runs"][1]["timings"] == {"resolve": 0.5, "embed": 1.0}
    assert [datetime.fromisoformat(p["hour"]).hour for p in body["coverage"]] == [8, 9]


def test_query_bounds(health_world: HealthWorld) -> None:
    client = _client(health_world.settings)

    assert [r["run_id"] for r in client.get("/api/health?runs=1").json()["runs"]] == [run_key(11)]
    assert client.get("/api/health?hours=3").json()["coverage"][0]["pair"] == 0.5
    assert client.get("/api/health?runs=0").status_code == 422


def test_page_renders_the_figures(health_world: HealthWorld) -> None:
    register_champion(registry.connect(health_world.settings))

    response = _client(health_world.settings).get("/")

    assert response.status_code == 200 and response.headers["content-type"].startswith("text/html")
    page = response.text
    assert f'data-version="{health_world.champion_version}"' in page and "(champion)" in page
    assert '<tr data-vm="ctr"><td>ctr (lead)</td><td>solaris-vm-ctr</td>' in page and '<tr data-vm="cvr">' in page
    assert all(f'data-run="{key}"' in page for key in health_world.run_keys_newest_first)
    assert '<polyline class="tier-any"' in page


def test_unreachable_store_is_a_message(health_world: HealthWorld) -> None:
    down = health_world.settings.with_overrides(store_url=f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    client = _client(down)

    response = client.get("/api/health")
    assert response.status_code == 503
    assert [p["source"] for p in response.json()["problems"]] == ["feature store"]
    page = client.get("/")
    assert page.status_code == 200
    assert "feature store unavailable" in page.text and "OperationalError" in page.text
    assert "Traceback" not in page.text


def test_mlflow_server_down_is_a_message_and_the_store_still_shows(health_world: HealthWorld) -> None:
    uri = f"http://127.0.0.1:{closed_port()}"
    down = health_world.settings.with_overrides(mlflow_tracking_uri=uri)

    response = _client(down).get("/api/health")

    assert response.status_code == 503
    body = response.json()
    assert [p["source"] for p in body["problems"]] == ["MLflow"] and uri in body["problems"][0]["message"]
    assert body["champion"] is None and body["versions"][0]["tables"]["pair_embeddings"]["rows"] > 0


def test_bad_configuration_names_the_variable(health_world: HealthWorld) -> None:
    def settings() -> Settings:
        return Settings.from_env({"SOLARIS_HOME": str(health_world.settings.home), "SOLARIS_DEVICE": "tpu"})

    response = TestClient(create_app(settings=settings, clock=lambda: T)).get("/api/health")

    assert response.status_code == 503
    [problem] = response.json()["problems"]
    assert problem["source"] == "configuration" and "SOLARIS_DEVICE='tpu'" in problem["message"]


@pytest.fixture
def answering_server() -> Iterator[str]:
    """A local HTTP server that answers 404 to everything: up, but no MLflow."""

    class NotFound(BaseHTTPRequestHandler):
        def do_GET(self) -> None:  # noqa: N802 (http.server's naming)
            self.send_error(404)

        def log_message(self, *args: object) -> None:
            pass

    server = HTTPServer(("127.0.0.1", 0), NotFound)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()
    thread.join()


def test_mlflow_probe(answering_server: str) -> None:
    assert mlflow_unreachable(answering_server) is None  # it answered: the reads will say what is wrong
    refused = f"http://127.0.0.1:{closed_port()}"
    assert mlflow_unreachable(refused).startswith(f"no answer from {refused}/health")
    assert mlflow_unreachable("sqlite:///anywhere.db") is None


def test_a_live_stacks_traffic_by_hour_is_on_the_page(health_world: HealthWorld) -> None:
    """The load driver's hours in the window, newest first; an hour at or after the page's time is not shown."""
    path = load_log_path(health_world.settings.data_dir)
    for back in (30, 2, 1, 0):
        stats = LoadStats()
        stats.count(200, 0.012)
        append_hour(path, hour_line(T - timedelta(hours=back), stats))  # T is on the hour
    client = _client(health_world.settings)

    load = client.get("/api/health?hours=24").json()["load"]
    page = client.get("/").text

    assert [datetime.fromisoformat(h["hour"]) for h in load] == [T - timedelta(hours=b) for b in (1, 2)]
    assert load[0]["ranker_p99_ms"] == pytest.approx(12.0) and load[0]["answered"] == 1
    assert "Live traffic, each hour" in page and "12.0" in page


def test_on_a_live_clock_the_page_is_at_simulated_time(monkeypatch: pytest.MonkeyPatch) -> None:
    sim = datetime(2026, 1, 7, tzinfo=UTC)
    clock = LiveClock(sim, datetime.now(UTC) - timedelta(seconds=60), hour_seconds=60)  # one simulated hour ago
    monkeypatch.setenv(CLOCK_ENV, clock.to_json())
    assert sim + timedelta(hours=1) <= now() < sim + timedelta(hours=2)
    monkeypatch.delenv(CLOCK_ENV)
    assert now() > datetime(2026, 12, 1, tzinfo=UTC)  # the wall clock


def test_each_run_is_a_line_linking_to_a_page_of_every_count(health_world: HealthWorld) -> None:
    client, key = _client(health_world.settings), run_key(10)

    line = client.get("/").text
    assert f'<a href="run/{key}">all counts</a>' in line
    assert "pairs_written" not in line  # the counts live on the run's page

    answer = client.get(f"/run/{key}")
    assert answer.status_code == 200 and 'href="../"' in answer.text
    assert '<tr data-count="pairs_written"><th>pairs_written</th><td>100</td></tr>' in answer.text
    assert '<tr data-count="selected"><th>selected</th><td>200</td></tr>' in answer.text
    assert f'<td id="selector">verifier: {FELL_BACK}</td>' in html.unescape(answer.text)  # which ran, and why
    (run,) = [r for r in client.get("/api/health").json()["runs"] if r["run_id"] == key]
    assert (run["selector"], run["selector_reason"]) == ("verifier", FELL_BACK)

    missing = client.get("/run/hourly__2026-03-01T23")
    assert missing.status_code == 404 and "the store holds no record of run hourly__2026-03-01T23" in missing.text
    down = health_world.settings.with_overrides(store_url=f"postgresql+psycopg://postgres@127.0.0.1:{closed_port()}/x")
    unreachable = _client(down).get(f"/run/{key}")
    assert unreachable.status_code == 503 and "feature store unavailable:</strong> OperationalError" in unreachable.text
