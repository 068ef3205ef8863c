"""The PNG figures written next to the HTML page: ``PLOTS`` maps each file to its caption and the function that
draws it, so the page links exactly the figures that were drawn. They use matplotlib's ``Figure`` directly,
never ``pyplot``, so drawing touches no global state.
"""

from __future__ import annotations

import math
from collections.abc import Callable
from datetime import datetime, timedelta
from pathlib import Path

from matplotlib.figure import Figure

from solaris.eval.figures import CUMULATIVE_TIERS, HourFigures, ReplayReport
from solaris.eval.protocol import FM, VM_BASE
from solaris.eval.report.tables import SPANS, TIER_LABELS


def write_plots(report: ReplayReport, out_dir: Path) -> dict[str, str]:
    """Every figure of ``PLOTS`` as a PNG in ``out_dir``; returns file name -> caption, in ``PLOTS`` order."""
    for file, (_, draw) in PLOTS.items():
        fig = Figure(figsize=(8, 4), layout="constrained")
        draw(fig, report)
        fig.savefig(out_dir / file, dpi=100)
    return {file: caption for file, (caption, _) in PLOTS.items()}


def _hour_middle(h: HourFigures) -> datetime:
    """Where an hour's figures sit on a time axis: mid-hour, inside the span shading [start, start + 1 h)."""
    try:
        return datetime.fromisoformat(h.hour) + timedelta(minutes=30)
    except ValueError as e:
        raise ValueError(f"hour {h.hour!r} is not an ISO 8601 time") from e


def _plot_coverage(fig: Figure, report: ReplayReport) -> None:
    ax = fig.subplots()
    times, half = [_hour_middle(h) for h in report.hours], timedelta(minutes=30)
    for tier in CUMULATIVE_TIERS:
        ax.plot(times, [h.coverage.get(tier, math.nan) for h in report.hours], marker=".", label=TIER_LABELS[tier])
    for span, shade in zip(SPANS, ("#edf2f7", "#fefcbf"), strict=True):
        in_span = [t for t, h in zip(times, report.hours, strict=True) if h.span == span]
        if in_span:
            ax.axvspan(min(in_span) - half, max(in_span) + half, color=shade, zorder=0, label=f"{span} span")
    ax.set(ylim=(0, 1.02), ylabel="cumulative share of served pairs", xlabel="hour")
    ax.legend(loc="lower right", fontsize="small")
    fig.autofmt_xdate()


def _plot_ne_vs_coverage(fig: Figure, report: ReplayReport) -> None:
    ax = fig.subplots()
    points = sorted(report.sweep, key=lambda p: p.top_fraction)
    xs, ys = [p.coverage.get("pair", math.nan) for p in points], [p.ne for p in points]
    ax.plot(xs, ys, marker="o", label="SOLARIS, all tiers")
    for p, x, y in zip(points, xs, ys, strict=True):
        ax.annotate(f"top {p.top_fraction:g}", (x, y), textcoords="offset points", xytext=(4, 4), fontsize="small")
    for name, style in ((FM, "--"), (VM_BASE, ":")):
        model = next((m for m in report.models if m.name == name), None)
        if model is not None:
            ax.axhline(model.ne, linestyle=style, color="gray", label=f"{name} NE")
    ax.set(xlabel="direct (pair) coverage", ylabel="NE")
    ax.legend(fontsize="small")


def _plot_transfer(fig: Figure, report: ReplayReport) -> None:
    ax = fig.subplots()
    models = [m for m in report.models if m.transfer_ratio is not None]
    ax.bar([m.name for m in models], [100 * m.transfer_ratio for m in models])
    ax.axhspan(42, 44, color="#c6f6d5", zorder=0, label="paper: SOLARIS 42-44%")
    ax.axhspan(20, 25, color="#fed7d7", zorder=0, label="paper: distillation 20-25%")
    ax.axhline(0, color="black", linewidth=0.8)
    ax.set(ylabel="transfer ratio, %")
    ax.tick_params(axis="x", labelrotation=20)
    ax.legend(fontsize="small")


def _plot_precompute(fig: Figure, report: ReplayReport) -> None:
    ax = fig.subplots()
    times = [_hour_middle(h) for h in report.hours]
    ax.bar(times, [h.fm_calls for h in report.hours], width=timedelta(minutes=40), color="#90cdf4", label="FM calls")
    ax.set(ylabel="FM calls (pairs embedded)", xlabel="hour")
    rate = ax.twinx()
    rates = (("hit_rate", "#c05621", "hit rate, same hour"), ("hit_rate_ttl", "#2f855a", "hit rate while fresh"))
    for name, color, label in rates:
        hit = [(t, getattr(h, name)) for t, h in zip(times, report.hours, strict=True) if getattr(h, name) is not None]
        rate.plot([t for t, _ in hit], [r for _, r in hit], color=color, marker=".", label=label)
    rate.set(ylim=(0, 1.02), ylabel="precompute hit rate")
    fig.legend(loc="outside upper right", fontsize="small")
    fig.autofmt_xdate()


def _plot_speculation(fig: Figure, report: ReplayReport) -> None:
    ax = fig.subplots()
    for selector, marker in (("verifier", "o"), ("budget", "s")):
        points = sorted((p for p in report.speculation if p.selector == selector), key=lambda p: p.fm_calls)
        ax.plot([p.fm_calls for p in points], [p.coverage_pair for p in points], marker=marker, label=selector)
    ax.set(xlabel="FM calls over the served hours", ylabel="direct (pair) coverage", ylim=(0, 1.02))
    ax.legend(fontsize="small")


PLOTS: dict[str, tuple[str, Callable[[Figure, ReplayReport], None]]] = {
    "coverage.png": ("Coverage by tier per hour (cumulative share of served pairs)", _plot_coverage),
    "ne_vs_coverage.png": ("NE of SOLARIS (all tiers) against direct coverage, by top_fraction", _plot_ne_vs_coverage),
    "transfer.png": ("Transfer ratio per model", _plot_transfer),
    "precompute.png": ("FM calls and precompute hit rate per hour", _plot_precompute),
    "speculation.png": ("Direct coverage against FM calls, verifier and budget selectors", _plot_speculation),
}
