"""The report as text: the ``Section`` rows that the terminal table and the HTML page both render (so the two
can't disagree), the grid that lays a section out, and the labels and cell formats the seed spread's table
reuses. The paper's figures stand beside ours as a reference column, never as something to assert.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from solaris.eval.figures import CUMULATIVE_TIERS, ModelScore, ReplayReport, SweepPoint, TierContribution
from solaris.eval.protocol import ALL_TIERS, FM, VM_BASE
from solaris.eval.report.invariants import check_invariants, no_transfer_reason, span_means

SPANS = ("logging", "eval")
TIER_LABELS = {
    "pair": "pair",
    "a2a": "+ similar items (A2A)",
    "agg": "+ user aggregate",
    "knn": "+ similar users",
    "cohort": "+ new-user cohort",
}
# arXiv 2604.12110, as quoted in issue #7 (the paper names ad-to-ad similarity as future work).
PAPER_TRANSFER = {"VM distilled": "20-25%", ALL_TIERS: "42-44%", "SOLARIS all+distill": "42-44%"}
PAPER_COVERAGE = {
    "pair": "40-50%",
    "a2a": "future work",
    "agg": "85-90%",
    "knn": "about +30% more",
    "cohort": "not in the paper",
}
DASH = "—"


@dataclass(frozen=True)
class Section:
    title: str
    header: tuple[str, ...]
    rows: list[tuple[str, ...]]


def sections(report: ReplayReport) -> list[Section]:
    return [
        _models(report),
        _per_vm(report),
        _slices(report),
        _tiers(report),
        _per_hour(report),
        _efficiency(report),
        _embeddings(report),
        _sweep(report),
        _speculation(report),
        _seconds(report),
    ]


# Every interval is a paired bootstrap over requests (eval.bootstrap): 95%, 1,000 resamples. "sd runs" is the
# spread over a VM variant's training runs (one per VM training seed), which no interval over requests shows.
SCORE_HEADER = ("NE", "95% CI", "gain vs base", "95% CI", "sd runs", "transfer", "95% CI", "sd runs")


def score_cells(s: ModelScore | SweepPoint) -> tuple[str, ...]:
    """NE, the NE gain over the base VM and the transfer ratio, each with its interval and its spread over
    training runs (a sweep point has one run)."""
    return (
        num(s.ne),
        interval(s.ne_ci95, num),
        num(s.ne_gain, "+.4f"),
        gain_interval(s.ne_gain_ci95),
        num(getattr(s, "ne_gain_runs_sd", None)),
        pct(s.transfer_ratio),
        interval(s.transfer_ratio_ci95, pct),
        pct(getattr(s, "transfer_ratio_runs_sd", None)),
    )


def interval(ci: list[float] | None, cell: Callable[[float], str]) -> str:
    return DASH if ci is None else f"[{cell(ci[0])}, {cell(ci[1])}]"


def gain_interval(ci: list[float] | None) -> str:
    return interval(ci, lambda x: num(x, "+.4f"))


def _models(report: ReplayReport) -> Section:
    rows = [(m.name, *score_cells(m), num(m.auc), PAPER_TRANSFER.get(m.name, "")) for m in report.models]
    reason = no_transfer_reason(report)
    title = "Models on the evaluation span" + (f" ({reason})" if reason else "")
    return Section(title, ("model", *SCORE_HEADER, "AUC", "paper"), rows)


PER_VM_MODELS = (FM, VM_BASE, ALL_TIERS, "SOLARIS all+distill")  # the per-VM table's rows


def _per_vm(report: ReplayReport) -> Section:
    """Each configured VM on its own label, and the paper's summary: the best relative log-loss gain of the
    SOLARIS VM (every tier) over its base VM across the VMs."""
    rows, gains = [], []
    for name, vm in report.per_vm.items():
        where = "" if vm.positions is None else f", positions {vm.positions[0]}-{vm.positions[1]}"
        label = f"{name} ({vm.label}{where}; {vm.events:,} events, {vm.positives:,} positive)"
        scored = {m.name: m for m in vm.models}
        rows += [(label, m, *score_cells(scored[m])) for m in PER_VM_MODELS if m in scored]
        if VM_BASE in scored and ALL_TIERS in scored:
            base, solaris = scored[VM_BASE].log_loss, scored[ALL_TIERS].log_loss
            gains.append((base - solaris) / base)
    if gains:
        rows.append(
            (
                f"up to {pct(max(gains))} relative log loss across {len(gains)} VMs",
                ALL_TIERS,
                *[DASH] * len(SCORE_HEADER),
            )
        )
    title = "Every VM on its own label, evaluation span (transfer against the FM's matching head)"
    return Section(title, ("VM", "model", *SCORE_HEADER), rows)


SLICE_MODELS = (FM, VM_BASE, "VM distilled", ALL_TIERS, "SOLARIS all+distill")  # the slice table's rows


def _slices(report: ReplayReport) -> Section:
    """The main table's key rows again on the impressions of ids the serving FM never trained on."""
    rows = []
    for c in report.slices:
        label = f"{c.name} ({pct(c.share)}, {c.events:,})"
        scored = [m for m in c.models if m.name in SLICE_MODELS]
        rows += [(label, m.name, *score_cells(m)[:4]) for m in scored] or [(label, "too few to score", *[DASH] * 4)]
    title = "Ids the serving FM never trained on, evaluation span (share of impressions, count)"
    return Section(title, ("slice", "model", *SCORE_HEADER[:4]), rows)


def _tiers(report: ReplayReport) -> Section:
    """Each tier in the feeding order: the served pairs it fed first, and what it adds to the VM's NE."""
    rows = [
        (
            TIER_LABELS[c.tier],
            pct(c.coverage_marginal),
            num(c.ne_gain, "+.4f"),
            gain_interval(c.ne_gain_ci95),
            num(c.ne_gain_runs_sd),
            _adds(c),
            f"{c.with_tier} vs {c.without}",
        )
        for c in report.tier_contributions
    ]
    if rows and report.users_known is not None:
        rows.append(
            (
                "users known before their hour",
                pct(report.users_known),
                DASH,
                DASH,
                DASH,
                "the most a user-keyed tier can feed",
                "",
            )
        )
    header = ("tier", "fed first", "NE gain", "95% CI", "sd runs", "adds", "models")
    return Section("Tiers in feeding order, evaluation span", header, rows)


def _adds(c: TierContribution) -> str:
    """A gain or a loss only beyond both its interval over requests and its spread over training runs."""
    if not c.measurable:
        return "nothing measurable"
    return "yes" if c.ne_gain > 0 else "a loss"


def _per_hour(report: ReplayReport) -> Section:
    means = {span: span_means(report, span) for span in SPANS}
    rows = [
        (f"coverage {TIER_LABELS[t]}", *(pct(means[s][t]) for s in SPANS), PAPER_COVERAGE[t]) for t in CUMULATIVE_TIERS
    ]
    rows.append(("precompute hit rate", *(pct(means[s]["hit_rate"]) for s in SPANS), ""))
    rows.append(("hit rate while fresh", *(pct(means[s]["hit_rate_ttl"]) for s in SPANS), ""))
    rows.append(("staleness, hours", *(num(means[s]["staleness"], ".2f") for s in SPANS), ""))
    return Section("Per hour, mean over the span's hours", ("figure", *SPANS, "paper"), rows)


def _efficiency(report: ReplayReport) -> Section:
    """Empty (so not shown) for a report written before it."""
    e = report.efficiency
    rows = [
        ("hit rate while fresh (pooled)", pct(e.get("hit_rate_ttl"))),
        ("its ceiling: the pools' pairs requested while fresh / pairs written", pct(e.get("hit_ceiling_ttl"))),
        ("selector AUC, requested while fresh", num(e.get("requested_auc"))),
        ("FM calls", num(e.get("fm_calls"), ".0f")),
        ("candidates covered by the pair tier", num(e.get("covered_candidates"), ".0f")),
        ("FM calls per covered candidate", num(e.get("fm_calls_per_covered_candidate"), ".3f")),
        ("covered candidates per FM call", num(e.get("covered_candidates_per_fm_call"), ".3f")),
    ]
    return Section("Precompute efficiency on the evaluation span", ("figure", "value"), rows if e else [])


def _embeddings(report: ReplayReport) -> Section:
    rows = [("FM calls per served pair", num(report.fm_calls_per_served_pair, ".3f"))]
    rows += [(f"staleness {k}, hours", num(v, ".2f")) for k, v in report.staleness_hours.items()]
    return Section("Embeddings served on the evaluation span", ("figure", "value"), rows)


def _sweep(report: ReplayReport) -> Section:
    rows = [
        (
            num(p.top_fraction, "g"),
            *(pct(p.coverage.get(t)) for t in CUMULATIVE_TIERS),
            *score_cells(p),
            num(p.fm_calls_per_served_pair, ".3f"),
            num(p.fm_calls_per_covered_candidate, ".3f"),
        )
        for p in sorted(report.sweep, key=lambda p: p.top_fraction)
    ]
    tiers = tuple(f"cov {TIER_LABELS[t]}" for t in CUMULATIVE_TIERS)
    header = ("top_fraction", *tiers, *SCORE_HEADER, "FM calls/served pair", "FM calls/covered cand.")
    undefined = any(p.transfer_ratio is None for p in report.sweep)
    note = "; no transfer ratio where the FM's gain on the swept hours is within its interval" if undefined else ""
    return Section(f"top_fraction sweep (SOLARIS, all tiers{note})", header, rows)


def _speculation(report: ReplayReport) -> Section:
    rows = [
        (
            p.selector,
            num(p.fm_budget, ".0f"),
            num(p.top_fraction, "g"),
            num(p.fm_calls, ".0f"),
            pct(p.coverage_pair),
            pct(p.hit_rate_ttl),
            pct(p.hit_ceiling_ttl),
            num(p.requested_auc, ".3f"),
            num(p.fm_calls_per_covered_candidate, ".3f"),
            num(p.ne),
            interval(p.ne_ci95, num),
            num(p.ne_gain_vs_verifier, "+.4f"),
            gain_interval(p.ne_gain_vs_verifier_ci95),
        )
        for p in report.speculation
    ]
    header = (
        "selector",
        "FM budget/h",
        "top_fraction",
        "FM calls",
        "cov pair",
        "hit while fresh",
        "hit ceiling",
        "requested AUC",
        "FM calls/covered cand.",
        "NE",
        "95% CI",
        "NE gain vs verifier",
        "95% CI",
    )
    return Section("Selectors at equal FM budgets (SOLARIS, all tiers)", header, rows)


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
