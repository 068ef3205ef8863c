"""The SOLARIS page behind Airflow's login, on a real api-server with the simple auth manager (as `solaris stack
up` and the compose stack run it): anonymous gets a 401 or the login, a logged-in browser gets the page, and
a token gets the JSON."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import urllib.error
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from local_service import poll

from solaris.airflow_env import airflow_env
from solaris.config import Settings
from solaris.ops.health import free_ports
from solaris.store import open_store

USER, PASSWORD = "admin", "page-login-test"
START_TIMEOUT_S = 180


@dataclass(frozen=True)
class ApiServer:
    url: str
    log: Path


class NoRedirect(urllib.request.HTTPRedirectHandler):
    def redirect_request(self, *args: object, **kwargs: object) -> None:
        return None  # the test reads the redirect itself


def _get(url: str, headers: dict[str, str] | None = None) -> tuple[int, dict[str, str], str]:
    opener = urllib.request.build_opener(NoRedirect)
    try:
        with opener.open(urllib.request.Request(url, headers=headers or {}), timeout=60) as answer:
            return answer.status, dict(answer.headers), answer.read().decode()
    except urllib.error.HTTPError as exc:
        return exc.code, dict(exc.headers), exc.read().decode()


def _health(url: str) -> int | None:
    try:
        return _get(url + "/api/v2/monitor/health")[0]
    except urllib.error.URLError:  # not listening yet
        return None


@pytest.fixture(scope="module")
def api_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[ApiServer]:
    """A migrated SQLite metadata DB, an initialised feature store, and `airflow api-server` with our plugins."""
    home = tmp_path_factory.mktemp("page_login")
    settings = Settings.from_env({"SOLARIS_HOME": str(home)})
    open_store(settings.store_url, init=True).close()
    passwords = home / "passwords.json"
    passwords.write_text(json.dumps({USER: PASSWORD}))
    [port] = free_ports("127.0.0.1", 1)
    env = (
        os.environ
        | airflow_env(settings)
        | {
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_USERS": f"{USER}:admin",
            "AIRFLOW__CORE__SIMPLE_AUTH_MANAGER_PASSWORDS_FILE": str(passwords),
            "AIRFLOW__API_AUTH__JWT_SECRET": "page-login-test-secret-of-some-length",
            "AIRFLOW__API__WORKERS": "1",
        }
    )
    settings.airflow_home.mkdir(parents=True, exist_ok=True)
    subprocess.run([sys.executable, "-m", "airflow", "db", "migrate"], env=env, check=True, capture_output=True)
    log = home / "api-server.log"
    with log.open("w") as out:
        server = subprocess.Popen(
            [sys.executable, "-m", "airflow", "api-server", "--host", "127.0.0.1", "--port", str(port)],
            env=env,
            stdout=out,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    url = f"http://127.0.0.1:{port}"
    try:
        poll(
            "the api-server to answer",
            lambda: _health(url) if server.poll() is None else "exited",
            lambda status: status in (200, "exited"),
            START_TIMEOUT_S,
            lambda: log.read_text(errors="replace")[-3000:],
        )
        assert server.poll() is None, log.read_text(errors="replace")[-3000:]
        yield ApiServer(url, log)
    finally:
        os.killpg(server.pid, 15)
        server.wait(timeout=60)


def _token(server: ApiServer, password: str = PASSWORD) -> str:
    request = urllib.request.Request(
        server.url + "/auth/token",
        data=json.dumps({"username": USER, "password": password}).encode(),
        headers={"Content-Type": "application/json"},
        method="POST",
    )
    with urllib.request.urlopen(request, timeout=60) as answer:
        return json.loads(answer.read())["access_token"]


def test_anonymous_gets_a_401_and_a_browser_the_login(api_server: ApiServer) -> None:
    json_status, _, body = _get(api_server.url + "/solaris/api/health")
    page_status, headers, _ = _get(api_server.url + "/solaris/", {"Accept": "text/html"})
    run_status, _, _ = _get(api_server.url + "/solaris/run/anything")

    assert json_status == 401 and json.loads(body) == {"detail": "Not authenticated"}
    assert page_status == 303 and headers["location"].startswith("/auth/login")
    assert "next=" in headers["location"] and "solaris" in headers["location"]
    assert run_status == 401  # every route, not only the two named in the issue


def test_a_logged_in_browser_gets_the_page(api_server: ApiServer) -> None:
    """The UI's login leaves Airflow's JWT in the ``_token`` cookie; the page's frame sends it."""
    status, _, page = _get(
        api_server.url + "/solaris/", {"Accept": "text/html", "Cookie": f"_token={_token(api_server)}"}
    )

    assert status == 200 and "<h1>SOLARIS feature store</h1>" in page and 'id="status"' in page


def test_a_token_gets_the_json_and_a_forged_one_does_not(api_server: ApiServer) -> None:
    status, _, body = _get(api_server.url + "/solaris/api/health", {"Authorization": f"Bearer {_token(api_server)}"})
    forged, _, _ = _get(api_server.url + "/solaris/api/health", {"Authorization": "Bearer not-a-jwt"})

    health = json.loads(body)
    assert status == 200 and health["ok"] and health["status"]["level"] in ("healthy", "degraded")
    assert forged == 403  # Airflow's own answer to an invalid token
