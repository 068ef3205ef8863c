"""The report as text: the ``Section`` rows that the terminal table and the HTML page both render (so the two
can't disagree), the grid that lays a section out, and the labels and cell formats the seed spread's table
reuses. The paper's figures stand beside ours as a reference column, never as something to assert.
"""

from __future__ import annotations

from dataclasses import dataclass

from solaris.eval.figures import CUMULATIVE_TIERS, ReplayReport
from solaris.eval.report.invariants import NO_TRANSFER, check_invariants, fm_loses_to_base, span_means

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


def sections(report: ReplayReport) -> list[Section]:
    return [_models(report), _per_hour(report), _embeddings(report), _sweep(report), _seconds(report)]


def _models(report: ReplayReport) -> Section:
    rows = [
        (m.name, num(m.ne), num(m.log_loss), num(m.auc), pct(m.transfer_ratio), PAPER_TRANSFER.get(m.name, ""))
        for m in report.models
    ]
    title = "Models on the evaluation span" + (f" ({NO_TRANSFER})" if fm_loses_to_base(report) else "")
    return Section(title, ("model", "NE", "log loss", "AUC", "transfer", "paper"), rows)


def _per_hour(report: ReplayReport) -> Section:
    means = {span: span_means(report, span) for span in SPANS}
    rows = [
        (f"coverage {TIER_LABELS[t]}", *(pct(means[s][t]) for s in SPANS), PAPER_COVERAGE[t]) for t in CUMULATIVE_TIERS
    ]
    rows.append(("precompute hit rate", *(pct(means[s]["hit_rate"]) for s in SPANS), ""))
    rows.append(("staleness, hours", *(num(means[s]["staleness"], ".2f") for s in SPANS), ""))
    return Section("Per hour, mean over the span's hours", ("figure", *SPANS, "paper"), rows)


def _embeddings(report: ReplayReport) -> Section:
    rows = [("FM calls per served pair", num(report.fm_calls_per_served_pair, ".3f"))]
    rows += [(f"staleness {k}, hours", num(v, ".2f")) for k, v in report.staleness_hours.items()]
    return Section("Embeddings served on the evaluation span", ("figure", "value"), rows)


def _sweep(report: ReplayReport) -> Section:
    rows = [
        (
            num(p.top_fraction, "g"),
            *(pct(p.coverage.get(t)) for t in CUMULATIVE_TIERS),
            num(p.ne),
            pct(p.transfer_ratio),
            num(p.fm_calls_per_served_pair, ".3f"),
        )
        for p in sorted(report.sweep, key=lambda p: p.top_fraction)
    ]
    tiers = tuple(f"cov {TIER_LABELS[t]}" for t in CUMULATIVE_TIERS)
    header = ("top_fraction", *tiers, "NE", "transfer", "FM calls/served pair")
    return Section("top_fraction sweep (SOLARIS, all tiers)", header, rows)


def _seconds(report: ReplayReport) -> Section:
    return Section("Seconds per phase", ("phase", "s"), [(k, num(v, ".1f")) for k, v in report.seconds.items()])


def num(x: float | None, fmt: str = ".4f") -> str:
    return DASH if x is None else format(x, fmt)


def pct(x: float | None) -> str:
    return DASH if x is None else f"{100 * x:.1f}%"


def table(report: ReplayReport) -> str:
    """The report as a terminal prints it, ending with the invariants' verdict."""
    parts = [_title(report), *(grid(s) for s in sections(report) if s.rows), _verdict(check_invariants(report))]
    return "\n\n".join(parts) + "\n"


def _title(report: ReplayReport) -> str:
    return f"SOLARIS replay: world {report.world}, seed {report.seed}\n{spans_line(report)}"


def spans_line(report: ReplayReport) -> str:
    """The report's spans on one line, as the text and the page head them."""
    return " · ".join(f"{k} {v}" for k, v in report.spans.items())


def _verdict(violations: list[str]) -> str:
    if not violations:
        return "Invariants: all hold"
    return "\n".join(["Invariants violated:", *(f"  - {v}" for v in violations)])


def grid(section: Section) -> str:
    """Columns padded to their widest cell: the first left-aligned, the rest right-aligned."""
    lines = [section.header, *section.rows]
    widths = [max(len(row[i]) for row in lines) for i in range(len(section.header))]

    def line(row: tuple[str, ...]) -> str:
        cells = [row[0].ljust(widths[0]), *(c.rjust(w) for c, w in zip(row[1:], widths[1:], strict=True))]
        return "  ".join(cells).rstrip()

    rule = "  ".join("-" * w for w in widths)
    return "\n".join([section.title, line(section.header), rule, *map(line, section.rows)])
