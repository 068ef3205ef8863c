"""The invariants CI asserts on a replay report, each broken one a sentence naming the figure, with the figures
derived from a report that the checks need and the tables show too (the mean per span, whether the FM beats the
base VM at all); they live here so that the checks depend on no rendering.
"""

from __future__ import annotations

import math
import statistics
from collections.abc import Callable, Iterable, Iterator
from dataclasses import asdict
from typing import Any

from solaris.eval.figures import CUMULATIVE_TIERS, ReplayReport
from solaris.eval.protocol import FM, VM_BASE

NO_TRANSFER = "transfer ratio undefined: the FM does not beat the base VM"
# How far the every-tier coverage may dip between two sweep points. The pair tier grows with top_fraction
# strictly (each arm embeds more of the same candidates); the every-tier share saturates near 99% on the
# tiny world, where it was once measured to dip by 0.0002 (a handful of candidates) from 0.05 to 0.1.
SATURATED_DIP = 0.001


def span_means(report: ReplayReport, span: str | None) -> dict[str, float | None]:
    """Mean over the span's hours (all hours for None) of each cumulative coverage tier, hit rates and staleness;
    None where the span has no hour with that figure, NaN where an hour lacks a tier (an invariant names it)."""
    hours = [h for h in report.hours if span is None or h.span == span]
    means = {tier: _mean([h.coverage.get(tier, math.nan) for h in hours]) for tier in CUMULATIVE_TIERS}
    means["hit_rate"] = _mean([h.hit_rate for h in hours if h.hit_rate is not None])
    means["hit_rate_ttl"] = _mean([h.hit_rate_ttl for h in hours if h.hit_rate_ttl is not None])
    means["staleness"] = _mean([h.staleness_hours_mean for h in hours if h.staleness_hours_mean is not None])
    return means


def _mean(values: list[float]) -> float | None:
    return statistics.fmean(values) if values else None


def fm_loses_to_base(report: ReplayReport) -> bool:
    """The FM does no better than the base VM, so no transfer ratio exists (False when either is missing)."""
    ne = {m.name: m.ne for m in report.models}
    return FM in ne and VM_BASE in ne and ne[FM] >= ne[VM_BASE]


def no_transfer_reason(report: ReplayReport) -> str | None:
    """Why the report has no transfer ratios, or None when it has them."""
    if fm_loses_to_base(report):
        return NO_TRANSFER
    fm, base = (next((m for m in report.models if m.name == name), None) for name in (FM, VM_BASE))
    if fm is None or base is None or fm.ne_gain is None or fm.ne_gain_ci95 is None or base.transfer_ratio is not None:
        return None
    width = fm.ne_gain_ci95[1] - fm.ne_gain_ci95[0]
    return (
        f"transfer ratio undefined: the FM's NE gain over the base VM, {fm.ne_gain:.4f}, is no larger than its "
        f"95% interval's width, {width:.4f}; read the NE gains"
    )


def check_invariants(report: ReplayReport) -> list[str]:
    """Every violated invariant as a sentence naming the figure; empty when all hold."""
    return [broken for check in INVARIANTS.values() for broken in check(report)]


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
        shares = [h.coverage[t] for t in CUMULATIVE_TIERS]
        if any(b < a for a, b in zip(shares, shares[1:])):
            chain = " <= ".join(f"{t} {h.coverage[t]:.4f}" for t in CUMULATIVE_TIERS)
            yield f"coverage by tier, hour {h.hour}: {chain} does not hold"
    means = span_means(report, None)
    first, last = CUMULATIVE_TIERS[0], CUMULATIVE_TIERS[-1]
    if not means[last] > means[first]:
        yield (
            f"coverage by tier, mean over all hours: the tiers after {first} add nothing "
            f"({last} {means[last]:.4f}, {first} {means[first]:.4f})"
        )


def _base_transfer(report: ReplayReport) -> Iterator[str]:
    base = next((m for m in report.models if m.name == VM_BASE), None)
    if base is None:
        yield f"transfer ratio: no {VM_BASE!r} model in the report"
    elif base.transfer_ratio is None and fm_loses_to_base(report):
        yield f"{NO_TRANSFER} (NE {report.model(FM).ne:.4f} against {base.ne:.4f})"
    elif base.transfer_ratio is None and (reason := no_transfer_reason(report)):
        yield reason
    elif base.transfer_ratio is None or abs(base.transfer_ratio) > 1e-12:
        yield f"transfer ratio of {VM_BASE!r} is {base.transfer_ratio}, not 0"


def _intervals(report: ReplayReport) -> Iterator[str]:
    """Every NE and NE gain has its interval, around the point for NE; a transfer ratio has one iff defined."""
    scored = [(f"model {m.name!r}", m) for m in report.models]
    scored += [(f"top_fraction sweep, point {p.top_fraction:g},", p) for p in report.sweep]
    for where, s in scored:
        for name in ("ne_ci95", "ne_gain_ci95"):
            if (ci := getattr(s, name)) is None or len(ci) != 2 or not ci[0] <= ci[1]:
                yield f"{where}: {name} is {ci}, not an interval [low, high]"
        if s.ne_ci95 and len(s.ne_ci95) == 2 and not s.ne_ci95[0] <= s.ne <= s.ne_ci95[1]:
            yield f"{where}: NE {s.ne:.4f} lies outside its interval {s.ne_ci95}"
        if s.transfer_ratio is not None and s.transfer_ratio_ci95 is None:
            yield f"{where}: transfer ratio {s.transfer_ratio:.4f} has no interval"
        elif s.transfer_ratio is None and s.transfer_ratio_ci95 is not None:
            yield f"{where}: an interval {s.transfer_ratio_ci95} for an undefined transfer ratio"


def _sweep_invariants(report: ReplayReport) -> Iterator[str]:
    points = sorted(report.sweep, key=lambda p: p.top_fraction)
    fractions = [p.top_fraction for p in points]
    expected = sorted(report.swept_fractions)
    if len(fractions) != len(expected) or not all(map(math.isclose, fractions, expected)):
        yield f"top_fraction sweep: fractions {fractions}, expected {expected}"
    if missing := _missing_tiers((f"top_fraction sweep, point {p.top_fraction:g},", p.coverage) for p in points):
        yield from missing
        return
    for tier, dip in ((CUMULATIVE_TIERS[0], 0.0), (CUMULATIVE_TIERS[-1], SATURATED_DIP)):
        shares = [p.coverage[tier] for p in points]
        if any(b < a - dip for a, b in zip(shares, shares[1:])):
            listed = ", ".join(f"{f:g}: {s:.4f}" for f, s in zip(fractions, shares, strict=True))
            yield f"top_fraction sweep: {tier} coverage falls as top_fraction grows ({listed})"


def _hits_within_ceiling(report: ReplayReport) -> Iterator[str]:
    """A run's writes come from its scored pool, so no hour hits more pairs than its pool had requested (the
    pooled figures mix hours with and without a known pool, so only the hours are held to it)."""
    for h in report.hours:
        if h.ttl_pool_requested is not None and h.ttl_hits > h.ttl_pool_requested:
            yield f"hour {h.hour}: {h.ttl_hits} pairs hit while fresh, above the {h.ttl_pool_requested} its pool had requested"


# The checks a report is held to, by name; report.json records which ran and what each found broken.
INVARIANTS: dict[str, Callable[[ReplayReport], Iterable[str]]] = {
    "finite figures": lambda report: _nonfinite(asdict(report), "report"),
    "coverage grows by tier": _tier_order,
    "base VM transfers nothing": _base_transfer,
    "top_fraction sweep": _sweep_invariants,
    "intervals": _intervals,
    "hits within the pool's ceiling": _hits_within_ceiling,
}
