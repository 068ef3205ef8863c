"""The FastAPI app the Airflow plugin mounts at ``/solaris``: ``GET /`` the page, ``GET /api/health`` its JSON.

The handlers are the boundary that takes ``now``; everything they show comes from :func:`build_report`.
Settings, store and MLflow client are set up per request, so the page follows the environment the
api-server runs with, and a source that comes back is seen on the next load. A failure anywhere becomes a
message on the page (and ``503`` on the JSON), never a traceback.
"""

from __future__ import annotations

import urllib.error
import urllib.request
from collections.abc import Callable, Sequence
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any

from fastapi import FastAPI, Query, params
from fastapi.responses import HTMLResponse, JSONResponse

from solaris.config import Settings, is_tracking_server
from solaris.live.clock import LiveClock

if TYPE_CHECKING:
    from solaris.monitoring.report import HealthReport

Clock = Callable[[], datetime]
RunsParam = Annotated[int, Query(ge=1, le=500, description="how many of the latest precompute runs")]
HoursParam = Annotated[int, Query(ge=1, le=24 * 14, description="hours of coverage and of the charts")]
CHART_HOURS = 48
PROBE_TIMEOUT_S = 3.0


def now() -> datetime:
    """On a live stack's clock, the simulated time (its runs and hours are simulated); else the wall clock."""
    wall = datetime.now(UTC)
    clock = LiveClock.from_env()
    return wall if clock is None else clock.sim_at(wall)


def create_app(
    settings: Callable[[], Settings] = Settings.from_env,
    clock: Clock = now,
    dependencies: Sequence[params.Depends] = (),
) -> FastAPI:
    """``dependencies`` guard every route (the api-server's: :mod:`solaris.monitoring.airflow_login`)."""
    app = FastAPI(
        title="SOLARIS feature store health",
        docs_url=None,
        redoc_url=None,
        openapi_url=None,
        dependencies=list(dependencies),
    )

    # Plain ``def`` handlers: FastAPI runs them in its thread pool, so store and MLflow calls never block the loop.
    @app.get("/", response_class=HTMLResponse)
    def page(runs: RunsParam = 24, hours: HoursParam = CHART_HOURS) -> HTMLResponse:
        from solaris.monitoring.render import report_html

        return HTMLResponse(report_html(_report(settings, clock(), runs, hours)))

    @app.get("/run/{run_id}", response_class=HTMLResponse)
    def run_page(run_id: str) -> HTMLResponse:
        """Every count of one run (the main page shows a line a run); 404 for a run the store does not hold."""
        from solaris.monitoring.render import run_html
        from solaris.monitoring.report import STORE, problem, run_health
        from solaris.store import open_configured_store

        try:
            with open_configured_store(settings()) as store:
                found = run_health(store, run_id, clock())
        except Exception as exc:  # named on the page, as the main page names a store it cannot read
            return HTMLResponse(run_html(run_id, None, problem(STORE, exc).message), status_code=503)
        return HTMLResponse(run_html(run_id, found), status_code=200 if found else 404)

    @app.get("/api/health")
    def health(runs: RunsParam = 24, hours: HoursParam = CHART_HOURS) -> JSONResponse:
        from solaris.monitoring.render import report_json

        body = report_json(_report(settings, clock(), runs, hours))
        return JSONResponse(body, status_code=200 if body["ok"] else 503)

    return app


def mlflow_unreachable(tracking_uri: str, timeout_s: float = PROBE_TIMEOUT_S) -> str | None:
    """Why an MLflow server does not answer, or None (also for a local store, which has no server).

    The page asks first because MLflow's client retries a refused connection for about 4 minutes.
    """
    if not is_tracking_server(tracking_uri):
        return None
    url = tracking_uri.rstrip("/") + "/health"
    try:
        with urllib.request.urlopen(url, timeout=timeout_s):
            return None
    except urllib.error.HTTPError:
        return None  # it answered; the reads that follow will say what is wrong
    except OSError as exc:
        return f"no answer from {url}: {exc}"


def load_hours(data_dir: Path, t: datetime, hours: int) -> list[dict[str, Any]]:
    """The live traffic's hours in the ``hours`` before ``t``, newest first (none unless a live stack ran)."""
    from solaris.live.figures import load_log_path, read_hours

    start = t - timedelta(hours=hours)
    recorded = read_hours(load_log_path(data_dir))
    return [h for h in reversed(recorded) if start <= datetime.fromisoformat(h["hour"]) < t]


def _report(settings: Callable[[], Settings], t: datetime, runs: int, hours: int) -> HealthReport:
    # Imported here, not at the top: the report pulls MLflow and the model registry (torch), and the
    # api-server imports this module when it loads plugins, long before anyone opens the page.
    from solaris.monitoring.capacity_plan import plan_on_page
    from solaris.monitoring.ranker_state import ranker_state
    from solaris.monitoring.report import MLFLOW, HealthReport, Problem, build_report, problem
    from solaris.store import open_configured_store
    from solaris.tracking import registry

    try:  # none of these reaches a server yet: what fails here is the configuration (a variable, a conn id)
        current = settings()
        vms = [spec.name for spec in current.vms()]
        client = registry.connect(current)
        store = open_configured_store(current)
    except Exception as exc:
        return HealthReport.unavailable(t, problem("configuration", exc))
    down = mlflow_unreachable(current.mlflow_tracking_uri)
    with store:
        report = build_report(store, None if down else client, t, vms=vms, n_runs=runs, hours=hours)
    load = load_hours(current.data_dir, t, hours)
    plan = plan_on_page(current.data_dir, current.world, report.history)
    report = replace(report, load=load, ranker=ranker_state(current.ranker_url, load), plan=plan)
    return replace(report, problems=[Problem(MLFLOW, down), *report.problems]) if down else report
