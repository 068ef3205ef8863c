"""The replay report: a table for the terminal, an HTML page with PNG plots, the invariants CI asserts, and the
spread over seeds (the transfer ratio is a ratio of small NE differences, so one seed says little).

Text and HTML render the same ``Section`` rows, so the two can't disagree. The paper's figures stand beside
ours as a reference column, never as something to assert.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import asdict, dataclass
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any

from jinja2 import Environment, select_autoescape
from matplotlib.figure import Figure

from solaris.eval.figures import CUMULATIVE_TIERS, HourFigures, ReplayReport, SweepPoint

FM, VM_BASE = "FM", "VM base"
SPANS = ("logging", "eval")
TIER_LABELS = {"pair": "pair", "agg": "+ user aggregate", "knn": "+ similar users"}
# arXiv 2604.12110, as quoted in issue #7.
PAPER_TRANSFER = {"VM distilled": "20-25%", "SOLARIS +knn": "42-44%", "SOLARIS all+distill": "42-44%"}
PAPER_COVERAGE = {"pair": "40-50%", "agg": "85-90%", "knn": "about +30% more"}
DASH = "—"


@dataclass(frozen=True)
class Section:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


@dataclass(frozen=True)
class Spread:
    """Mean, sample standard deviation (None for one seed) and range of one figure over seeds."""

    mean: float
    sd: float | None
    lo: float
    hi: float

    @classmethod
    def of(cls, values: Sequence[float]) -> Spread:
        sd = statistics.stdev(values) if len(values) > 1 else None
        return cls(statistics.fmean(values), sd, min(values), max(values))

    def text(self, show: Callable[[float], str]) -> str:
        sd = show(self.sd) if self.sd is not None else DASH
        return f"{show(self.mean)} ± {sd} ({show(self.lo)}..{show(self.hi)})"


# ---- figures derived from a report -------------------------------------------------------------------------


def span_means(report: ReplayReport, span: str | None) -> dict[str, float | None]:
    """Mean over the span's hours (all hours for None) of each cumulative coverage tier, hit rate and staleness;
    None where the span has no hour with that figure, NaN where an hour lacks a tier (an invariant names it)."""
    hours = [h for h in report.hours if span is None or h.span == span]
    means = {tier: _mean([h.coverage.get(tier, math.nan) for h in hours]) for tier in CUMULATIVE_TIERS}
    means["hit_rate"] = _mean([h.hit_rate for h in hours if h.hit_rate is not None])
    means["staleness"] = _mean([h.staleness_hours_mean for h in hours if h.staleness_hours_mean is not None])
    return means


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


# ---- the sections both renderings share ---------------------------------------------------------------------


def sections(report: ReplayReport) -> list[Section]:
    return [_models(report), _per_hour(report), _embeddings(report), _sweep(report), _seconds(report)]


def _models(report: ReplayReport) -> Section:
    rows = [
        (m.name, _num(m.ne), _num(m.log_loss), _num(m.auc), _pct(m.transfer_ratio), PAPER_TRANSFER.get(m.name, ""))
        for m in report.models
    ]
    title = "Models on the evaluation span" + (f" ({NO_TRANSFER})" if fm_loses_to_base(report) else "")
    return Section(title, ("model", "NE", "log loss", "AUC", "transfer", "paper"), rows)


NO_TRANSFER = "transfer ratio undefined: the FM does not beat the base VM"


def fm_loses_to_base(report: ReplayReport) -> bool:
    """The FM does no better than the base VM, so no transfer ratio exists (False when either is missing)."""
    ne = {m.name: m.ne for m in report.models}
    return FM in ne and VM_BASE in ne and ne[FM] >= ne[VM_BASE]


def _per_hour(report: ReplayReport) -> Section:
    means = {span: span_means(report, span) for span in SPANS}
    rows = [
        (f"coverage {TIER_LABELS[t]}", *(_pct(means[s][t]) for s in SPANS), PAPER_COVERAGE[t]) for t in CUMULATIVE_TIERS
    ]
    rows.append(("precompute hit rate", *(_pct(means[s]["hit_rate"]) for s in SPANS), ""))
    rows.append(("staleness, hours", *(_num(means[s]["staleness"], ".2f") for s in SPANS), ""))
    return Section("Per hour, mean over the span's hours", ("figure", *SPANS, "paper"), rows)


def _embeddings(report: ReplayReport) -> Section:
    rows = [("FM calls per served pair", _num(report.fm_calls_per_served_pair, ".3f"))]
    rows += [(f"staleness {k}, hours", _num(v, ".2f")) for k, v in report.staleness_hours.items()]
    return Section("Embeddings served on the evaluation span", ("figure", "value"), rows)


def _sweep(report: ReplayReport) -> Section:
    rows = [
        (
            _num(p.top_fraction, "g"),
            *(_pct(p.coverage.get(t)) for t in CUMULATIVE_TIERS),
            _num(p.ne),
            _pct(p.transfer_ratio),
            _num(p.fm_calls_per_served_pair, ".3f"),
        )
        for p in sorted(report.sweep, key=lambda p: p.top_fraction)
    ]
    tiers = tuple(f"cov {TIER_LABELS[t]}" for t in CUMULATIVE_TIERS)
    header = ("top_fraction", *tiers, "NE", "transfer", "FM calls/served pair")
    return Section("top_fraction sweep (SOLARIS, all tiers)", header, rows)


def _seconds(report: ReplayReport) -> Section:
    return Section("Seconds per phase", ("phase", "s"), [(k, _num(v, ".1f")) for k, v in report.seconds.items()])


def _num(x: float | None, fmt: str = ".4f") -> str:
    return DASH if x is None else format(x, fmt)


def _pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


# ---- text ---------------------------------------------------------------------------------------------------


def table(report: ReplayReport) -> str:
    """The report as a terminal prints it, ending with the invariants' verdict."""
    parts = [_title(report), *(_grid(s) for s in sections(report) if s.rows), _verdict(check_invariants(report))]
    return "\n\n".join(parts) + "\n"


def _title(report: ReplayReport) -> str:
    return f"SOLARIS replay: world {report.world}, seed {report.seed}\n{_spans(report)}"


def _spans(report: ReplayReport) -> str:
    return " · ".join(f"{k} {v}" for k, v in report.spans.items())


def _verdict(violations: list[str]) -> str:
    if not violations:
        return "Invariants: all hold"
    return "\n".join(["Invariants violated:", *(f"  - {v}" for v in violations)])


def _grid(section: Section) -> str:
    """Columns padded to their widest cell: the first left-aligned, the rest right-aligned."""
    lines = [section.header, *section.rows]
    widths = [max(len(row[i]) for row in lines) for i in range(len(section.header))]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([section.title, line(section.header), rule, *map(line, section.rows)])


# ---- HTML and plots -----------------------------------------------------------------------------------------

_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<title>SOLARIS replay: {{ report.world }} seed {{ report.seed }}</title>
<style>
  body { font: 14px/1.4 system-ui, sans-serif; margin: 1.5rem; color: #1a202c; max-width: 64rem; }
  h1 { font-size: 1.4rem; margin: 0 0 .25rem; } h2 { font-size: 1.1rem; margin: 1.5rem 0 .5rem; }
  table { border-collapse: collapse; margin-bottom: .75rem; }
  th, td { border-bottom: 1px solid #e2e8f0; padding: .25rem .6rem; text-align: right; white-space: nowrap; }
  th:first-child, td:first-child { text-align: left; } th { background: #f7fafc; }
  .muted { color: #718096; } .bad { color: #c53030; } img { max-width: 100%; }
</style>
</head>
<body>
<h1>SOLARIS replay: world {{ report.world }}, seed {{ report.seed }}</h1>
<div class="muted">{{ spans }}</div>
<h2>Invariants</h2>
{% if violations %}<ul class="bad">{% for v in violations %}<li>{{ v }}</li>{% endfor %}</ul>
{% else %}<p>All hold.</p>{% endif %}
{% for s in sections if s.rows %}
<h2>{{ s.title }}</h2>
<table>
  <tr>{% for h in s.header %}<th>{{ h }}</th>{% endfor %}</tr>
  {% for row in s.rows %}<tr>{% for c in row %}<td>{{ c }}</td>{% endfor %}</tr>{% endfor %}
</table>
{% endfor %}
{% for file, caption in plots.items() %}
<h2>{{ caption }}</h2>
<img src="{{ file }}" alt="{{ caption }}">
{% endfor %}
</body>
</html>
"""


def write_html(report: ReplayReport, out_dir: Path) -> Path:
    """``report.html`` with its PNGs beside it (relative links: the folder moves as one, e.g. into MLflow),
    plus ``report.json``."""
    out_dir = Path(out_dir)
    out_dir.mkdir(parents=True, exist_ok=True)
    for file, (_, draw) in PLOTS.items():
        fig = Figure(figsize=(8, 4), layout="constrained")
        draw(fig, report)
        fig.savefig(out_dir / file, dpi=100)
    page = Environment(autoescape=select_autoescape(default_for_string=True)).from_string(_PAGE)
    html = out_dir / "report.html"
    html.write_text(
        page.render(
            report=report,
            spans=_spans(report),
            sections=sections(report),
            plots={file: caption for file, (caption, _) in PLOTS.items()},
            violations=check_invariants(report),
        )
    )
    report.write_json(out_dir / "report.json")
    return html


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
    hit = [(t, h.hit_rate) for t, h in zip(times, report.hours, strict=True) if h.hit_rate is not None]
    rate.plot([t for t, _ in hit], [r for _, r in hit], color="#c05621", marker=".", label="hit rate")
    rate.set(ylim=(0, 1.02), ylabel="precompute hit rate")
    fig.legend(loc="outside upper right", fontsize="small")
    fig.autofmt_xdate()


PLOTS: dict[str, tuple[str, Callable[[Figure, ReplayReport], None]]] = {
    "coverage.png": ("Coverage by tier per hour (cumulative share of served pairs)", _plot_coverage),
    "ne_vs_coverage.png": ("NE of SOLARIS (all tiers) against direct coverage, by top_fraction", _plot_ne_vs_coverage),
    "transfer.png": ("Transfer ratio per model", _plot_transfer),
    "precompute.png": ("FM calls and precompute hit rate per hour", _plot_precompute),
}


# ---- invariants ---------------------------------------------------------------------------------------------


def check_invariants(report: ReplayReport) -> list[str]:
    """Every violated invariant as a sentence naming the figure; empty when all hold."""
    return [
        *_nonfinite(asdict(report), "report"),
        *_tier_order(report),
        *_base_transfer(report),
        *_sweep_invariants(report),
    ]


def _nonfinite(value: Any, path: str) -> Iterator[str]:
    if isinstance(value, float) and not math.isfinite(value):
        yield f"{path} is {value}, not a finite number"
    elif isinstance(value, dict):
        for k, v in value.items():
            yield from _nonfinite(v, f"{path}.{k}")
    elif isinstance(value, list):
        for i, v in enumerate(value):
            yield from _nonfinite(v, f"{path}[{i}]")


def _missing_tiers(coverages: Iterable[tuple[str, dict[str, float]]]) -> list[str]:
    """For each (figure, coverage) lacking a tier, a sentence naming both."""
    gaps = ((where, [t for t in CUMULATIVE_TIERS if t not in c]) for where, c in coverages)
    return [f"{where} lacks coverage tier(s) {', '.join(missing)}" for where, missing in gaps if missing]


def _tier_order(report: ReplayReport) -> Iterator[str]:
    if not report.hours:
        yield "coverage by tier: the report has no hours"
        return
    if missing := _missing_tiers((f"coverage by tier, hour {h.hour},", h.coverage) for h in report.hours):
        yield from missing
        return
    for h in report.hours:
        c = h.coverage
        if not c["pair"] <= c["agg"] <= c["knn"]:
            yield (
                f"coverage by tier, hour {h.hour}: pair {c['pair']:.4f} <= agg {c['agg']:.4f} <= knn {c['knn']:.4f}"
                " does not hold"
            )
    means = span_means(report, None)
    if not means["agg"] > means["pair"]:
        yield (
            f"coverage by tier, mean over all hours: the user aggregate adds nothing "
            f"(agg {means['agg']:.4f}, pair {means['pair']:.4f})"
        )


def _base_transfer(report: ReplayReport) -> Iterator[str]:
    base = next((m for m in report.models if m.name == VM_BASE), None)
    if base is None:
        yield f"transfer ratio: no {VM_BASE!r} model in the report"
    elif base.transfer_ratio is None and fm_loses_to_base(report):
        yield f"{NO_TRANSFER} (NE {report.model(FM).ne:.4f} against {base.ne:.4f})"
    elif base.transfer_ratio is None or abs(base.transfer_ratio) > 1e-12:
        yield f"transfer ratio of {VM_BASE!r} is {base.transfer_ratio}, not 0"


def _sweep_invariants(report: ReplayReport) -> Iterator[str]:
    points = sorted(report.sweep, key=lambda p: p.top_fraction)
    fractions = [p.top_fraction for p in points]
    expected = sorted(report.swept_fractions)
    if len(fractions) != len(expected) or not all(map(math.isclose, fractions, expected)):
        yield f"top_fraction sweep: fractions {fractions}, expected {expected}"
    if missing := _missing_tiers((f"top_fraction sweep, point {p.top_fraction:g},", p.coverage) for p in points):
        yield from missing
        return
    for tier in ("pair", "knn"):
        shares = [p.coverage[tier] for p in points]
        if any(b < a for a, b in zip(shares, shares[1:])):
            listed = ", ".join(f"{f:g}: {s:.4f}" for f, s in zip(fractions, shares, strict=True))
            yield f"top_fraction sweep: {tier} coverage falls as top_fraction grows ({listed})"


# ---- several seeds ------------------------------------------------------------------------------------------


def seed_spreads(reports: Sequence[ReplayReport]) -> dict[str, dict[str, Spread]]:
    """Per figure group, per row: the spread over the reports (seeds of one world)."""
    _check_comparable(reports)
    names = [m.name for m in reports[0].models]
    fractions = sorted(p.top_fraction for p in reports[0].sweep)
    eval_means = [span_means(r, "eval") for r in reports]

    def sweep(r: ReplayReport, f: float) -> SweepPoint:
        return next(p for p in r.sweep if p.top_fraction == f)

    return {
        "NE": {n: Spread.of([r.model(n).ne for r in reports]) for n in names},
        "transfer ratio": {
            n: Spread.of(ratios) for n in names if (ratios := _defined(r.model(n).transfer_ratio for r in reports))
        },
        "coverage, eval span": {t: Spread.of([m[t] for m in eval_means]) for t in CUMULATIVE_TIERS},
        "sweep NE": {f"{f:g}": Spread.of([sweep(r, f).ne for r in reports]) for f in fractions},
        "sweep transfer ratio": {
            f"{f:g}": Spread.of(ratios) for f in fractions if (ratios := _defined(sweep(r, f).transfer_ratio for r in reports))
        },
    }


def _defined(values: Iterable[float | None]) -> list[float]:
    """The seeds where a transfer ratio exists (the FM beat the base VM)."""
    return [v for v in values if v is not None]


def _check_comparable(reports: Sequence[ReplayReport]) -> None:
    if not reports:
        raise ValueError("no reports: the spread over seeds needs at least one")
    first = reports[0]
    if worlds := sorted({_world(r) for r in reports} - {_world(first)}):
        raise ValueError(f"reports of different worlds: {_world(first)} and {', '.join(worlds)}")
    seeds = [r.seed for r in reports]
    if len(set(seeds)) != len(seeds):
        raise ValueError(f"a seed appears twice: {seeds}")
    for r in reports[1:]:
        if [m.name for m in r.models] != [m.name for m in first.models]:
            raise ValueError(f"seed {r.seed} has models {[m.name for m in r.models]}, seed {first.seed} others")
        if sorted(p.top_fraction for p in r.sweep) != sorted(p.top_fraction for p in first.sweep):
            raise ValueError(f"seed {r.seed} swept other top_fractions than seed {first.seed}")
    if any(span_means(r, "eval")["pair"] is None for r in reports):
        raise ValueError("a report has no eval-span hours")


def _world(report: ReplayReport) -> str:
    """The world without its seed: a generated preset is named ``<preset>-seed<N>`` per seed (eval.job)."""
    return report.world.removesuffix(f"-seed{report.seed}")


def seeds_table(reports: Sequence[ReplayReport]) -> str:
    """Mean ± sample standard deviation (min..max) of each figure over the seeds."""
    spreads = seed_spreads(reports)

    def cell(group: str, key: str, show: Callable[[float], str]) -> str:
        return spreads[group][key].text(show) if key in spreads[group] else DASH

    undefined = ", ".join(str(r.seed) for r in reports if fm_loses_to_base(r))
    note = f" (seed(s) {undefined}: {NO_TRANSFER}; transfer over the others)" if undefined else ""
    models = Section(
        "Models on the evaluation span" + note,
        ("model", "NE", "transfer", "paper"),
        [(n, cell("NE", n, _num), cell("transfer ratio", n, _pct), PAPER_TRANSFER.get(n, "")) for n in spreads["NE"]],
    )
    coverage = Section(
        "Coverage over the evaluation span, mean over its hours",
        ("tier", "share", "paper"),
        [(TIER_LABELS[t], cell("coverage, eval span", t, _pct), PAPER_COVERAGE[t]) for t in CUMULATIVE_TIERS],
    )
    sweep = Section(
        "top_fraction sweep (SOLARIS, all tiers)",
        ("top_fraction", "NE", "transfer"),
        [(f, cell("sweep NE", f, _num), cell("sweep transfer ratio", f, _pct)) for f in spreads["sweep NE"]],
    )
    seeds = ", ".join(str(r.seed) for r in reports)
    title = f"SOLARIS replay: world {_world(reports[0])}, seeds {seeds}: mean ± sample sd (min..max)"
    return "\n\n".join([title, *(_grid(s) for s in (models, coverage, sweep))]) + "\n"
