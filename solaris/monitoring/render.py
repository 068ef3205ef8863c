"""The health report as JSON (for scripts and the stack test) and as the HTML page shown in the Airflow UI."""

from __future__ import annotations

from dataclasses import asdict
from datetime import datetime
from functools import cache
from pathlib import Path
from typing import Any

from jinja2 import Environment, FileSystemLoader, select_autoescape

from solaris.monitoring.capacity_plan import PlanOnPage, plan_chart
from solaris.monitoring.page_charts import charts_json, page_charts
from solaris.monitoring.report import COVERAGE_TIERS, CoveragePoint, HealthReport, RunHealth, VersionHealth
from solaris.monitoring.status import THRESHOLDS, Status, health_status
from solaris.precompute.run_files import DEGENERATE_PREFIX
from solaris.store.records import TableStats
from solaris.vms import registered_name

TEMPLATES = Path(__file__).parent / "templates"


def report_json(report: HealthReport) -> dict[str, Any]:
    """Plain JSON types only; times as ISO 8601 strings, ``null`` where there is none.

    ``ok`` is false when a source could not be read (``problems``) or the latest run failed or is stale
    (``alerts``). A run's ``status`` is the store's record; ``stale`` says a ``running`` one is dead.
    """
    return {
        "at": _iso(report.at),
        "hours": report.hours,
        "ok": report.ok,
        "status": status_json(health_status(report)),
        "problems": [asdict(p) for p in report.problems],
        "alerts": [asdict(a) for a in report.alerts],
        "champion": asdict(report.champion) if report.champion else None,
        "champion_note": report.champion_note,
        "vms": [
            {
                "vm": c.vm,
                "model": registered_name(c.vm),
                "champion": asdict(c.chain) if c.chain else None,
                "note": c.note,
            }
            for c in report.vms
        ],
        "versions": [_version(v) for v in report.versions],
        "runs": [_run(r) for r in report.runs],
        "coverage": [_point(p) for p in report.coverage],
        "load": report.load,
        "charts": charts_json(report),
        "plan": _plan(report.plan),
    }


def status_json(status: Status) -> dict[str, Any]:
    """The level, its reasons (worst first), every check's reading and the thresholds they are held to."""
    return {
        "level": status.level,
        "reasons": [asdict(r) for r in status.reasons],
        "readings": [asdict(r) for r in status.readings],
        "thresholds": [asdict(t) for t in THRESHOLDS],
    }


def report_html(report: HealthReport) -> str:
    """The page; a run's non-zero degenerate-vector counts (its own or its shadow's) stand out among its counts:
    the FM gave vectors the hour had to leave out."""
    data = report_json(report)
    return (
        _environment()
        .get_template("health.html")
        .render(
            report=data,
            charts=page_charts(report),
            plan_chart=plan_chart(report.plan) if report.plan else None,
            tiers=COVERAGE_TIERS,
            degenerate=DEGENERATE_PREFIX,
        )
    )


def run_html(run_id: str, run: RunHealth | None, store_problem: str | None = None) -> str:
    """One run's page: every count (degenerate ones stand out), timing and figure; ``None``: no such run, or
    the store could not be read (``store_problem``)."""
    found = None if run is None else _run(run)
    template = _environment().get_template("run.html")
    return template.render(run_id=run_id, run=found, problem=store_problem, degenerate=DEGENERATE_PREFIX)


@cache
def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=select_autoescape(["html"]))


def _iso(t: datetime | None) -> str | None:
    return t.isoformat() if t else None


def _table(stats: TableStats) -> dict[str, Any]:
    return {
        "rows": stats.rows,
        "fresh": stats.fresh,
        "fresh_share": stats.fresh_share,
        "oldest_created_at": _iso(stats.oldest_created_at),
        "newest_created_at": _iso(stats.newest_created_at),
        "expiring_within_hour": stats.expiring_within_hour,
    }


def _version(v: VersionHealth) -> dict[str, Any]:
    return {"version": v.version, "champion": v.champion, "tables": {n: _table(s) for n, s in v.tables.items()}}


def _run(run: RunHealth) -> dict[str, Any]:
    r = run.record
    return {
        "run_id": r.run_id,
        "interval_start": _iso(r.interval_start),
        "interval_end": _iso(r.interval_end),
        "status": r.status,
        "stale": run.stale,
        "fm_version": r.fm_version,
        "ae_version": r.ae_version,
        "vm_version": r.vm_version,
        "embedding_version": r.embedding_version,
        "counts": r.counts,
        "timings": r.timings,
        "started_at": _iso(r.started_at),
        "finished_at": _iso(r.finished_at),
        "reason": r.reason,
        "selector": r.selector,
        "selector_reason": r.selector_reason,
        "figures": run.figures,
    }


def _point(p: CoveragePoint) -> dict[str, Any]:
    return {"hour": _iso(p.hour), **p.shares}


def _plan(found: PlanOnPage | None) -> dict[str, Any] | None:
    """The plan as written, its file (``other_world``: production's world, where the plan is another's), and
    today's knobs against its knee (``past_knee`` null where they cannot be compared)."""
    if found is None:
        return None
    plan = found.plan.as_dict() if found.plan else None
    today = asdict(found.today) if found.today else None
    where = {"path": found.path, "problem": found.problem, "other_world": found.other_world}
    return where | {"today_from": found.today_from, "today": today, "plan": plan}
