"""The report as an HTML page, rendered from ``templates/report.html.j2`` (autoescaped: every figure and sentence
is escaped): the same sections as the terminal table, the seed's capacity plan, the broken invariants, and the
PNG plots linked beside it.
"""

from __future__ import annotations

from dataclasses import replace
from functools import cache
from pathlib import Path

from jinja2 import Environment, FileSystemLoader

from solaris.eval.figures import ReplayReport
from solaris.eval.plan import make_plan
from solaris.eval.report.invariants import INVARIANTS, check_invariants
from solaris.eval.report.plan_view import PLAN_CAPTION, plan_sections, write_plan_png
from solaris.eval.report.plots import write_plots
from solaris.eval.report.tables import sections, spans_line

TEMPLATES = Path(__file__).parent / "templates"


def write_html(report: ReplayReport, out_dir: Path) -> Path:
    """``report.html`` with its PNGs beside it (relative links: the folder moves as one, e.g. into MLflow),
    plus ``report.json``, which records the invariants checked and the ones broken."""
    violations = check_invariants(report)
    report = replace(report, invariants={"checked": list(INVARIANTS), "violated": violations})
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    plots, shown = write_plots(report, out_dir), sections(report)
    if report.curve:  # this seed's own plan (solaris plan pools the seeds)
        plan = make_plan([report])
        shown += plan_sections(plan)
        write_plan_png(plan, out_dir / "plan.png")
        plots["plan.png"] = PLAN_CAPTION
    page = _environment().get_template("report.html.j2")
    html = out_dir / "report.html"
    html.write_text(
        page.render(
            report=report,
            spans=spans_line(report),
            sections=shown,
            plots=plots,
            violations=violations,
        )
    )
    report.write_json(out_dir / "report.json")
    return html


@cache
def _environment() -> Environment:
    return Environment(loader=FileSystemLoader(TEMPLATES), autoescape=True)
