"""The spread of a report's figures over seeds of one world: the transfer ratio is a ratio of small NE
differences, so one seed says little. The reports are checked to be comparable (one world, distinct seeds, the
same models and sweep) before any figure is pooled, and the table lays out like the single report's.
"""

from __future__ import annotations

import statistics
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass

from solaris.eval.figures import CUMULATIVE_TIERS, ReplayReport, SweepPoint
from solaris.eval.report.invariants import no_transfer_reason, span_means
from solaris.eval.report.tables import DASH, PAPER_COVERAGE, PAPER_TRANSFER, TIER_LABELS, Section, grid, num, pct


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
            f"{f:g}": Spread.of(ratios)
            for f in fractions
            if (ratios := _defined(sweep(r, f).transfer_ratio for r in reports))
        },
    }


def _defined(values: Iterable[float | None]) -> list[float]:
    """The seeds where a transfer ratio exists (the FM beat the base VM)."""
    return [v for v in values if v is not None]


def _check_comparable(reports: Sequence[ReplayReport]) -> None:
    if not reports:
        raise ValueError("no reports: the spread over seeds needs at least one")
    first = reports[0]
    if worlds := sorted({r.replayed_world for r in reports} - {first.replayed_world}):
        raise ValueError(f"reports of different worlds: {first.replayed_world} and {', '.join(worlds)}")
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


def seeds_table(reports: Sequence[ReplayReport]) -> str:
    """Mean ± sample standard deviation (min..max) of each figure over the seeds."""
    spreads = seed_spreads(reports)

    def cell(group: str, key: str, show: Callable[[float], str]) -> str:
        return spreads[group][key].text(show) if key in spreads[group] else DASH

    undefined = "; ".join(f"seed {r.seed}: {reason}" for r in reports if (reason := no_transfer_reason(r)))
    note = f" ({undefined}; transfer over the other seeds)" if undefined else ""
    models = Section(
        "Models on the evaluation span" + note,
        ("model", "NE", "transfer", "paper"),
        [(n, cell("NE", n, num), cell("transfer ratio", n, pct), PAPER_TRANSFER.get(n, "")) for n in spreads["NE"]],
    )
    coverage = Section(
        "Coverage over the evaluation span, mean over its hours",
        ("tier", "share", "paper"),
        [(TIER_LABELS[t], cell("coverage, eval span", t, pct), PAPER_COVERAGE[t]) for t in CUMULATIVE_TIERS],
    )
    sweep = Section(
        "top_fraction sweep (SOLARIS, all tiers)",
        ("top_fraction", "NE", "transfer"),
        [(f, cell("sweep NE", f, num), cell("sweep transfer ratio", f, pct)) for f in spreads["sweep NE"]],
    )
    seeds = ", ".join(str(r.seed) for r in reports)
    title = f"SOLARIS replay: world {reports[0].replayed_world}, seeds {seeds}: mean ± sample sd (min..max)"
    return "\n\n".join([title, *(grid(s) for s in (models, coverage, sweep))]) + "\n"
