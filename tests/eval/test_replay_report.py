"""The replay report on hand-built ReplayReports: one valid, and variations that break one invariant each."""

from __future__ import annotations

import json
import math
import statistics
from collections.abc import Callable
from dataclasses import replace
from datetime import datetime, timedelta, timezone
from pathlib import Path
from typing import TypeVar

import numpy as np
import pytest
from plan_curves import CURVE

from solaris.eval.arms import pooled_efficiency
from solaris.eval.figures import (
    CUMULATIVE_TIERS,
    SWEEP_FRACTIONS,
    HourFigures,
    ModelScore,
    ReplayReport,
    Slice,
    SweepPoint,
    TierContribution,
    VMFigures,
)
from solaris.eval.protocol import ALL_TIERS, VM_BASE
from solaris.eval.report import (
    INVARIANTS,
    PLOTS,
    check_invariants,
    seed_spreads,
    seeds_table,
    span_means,
    table,
    write_html,
)
from solaris.eval.report.invariants import SATURATED_DIP
from solaris.eval.scoring import MIN_SLICE_EVENTS, score_models, score_slices
from solaris.models.metrics import transfer_ratio

START = datetime(2026, 3, 2, 10, tzinfo=timezone.utc)
T = TypeVar("T", ModelScore, SweepPoint)
# NE per model before the seed's jitter; the FM beats the base VM, every variant lands in between.
NE = {
    "FM": 0.800,
    "VM base": 0.900,
    "VM distilled": 0.877,
    "SOLARIS pair": 0.870,
    "SOLARIS +agg": 0.866,
    "SOLARIS +knn": 0.858,
    "SOLARIS +cohort": 0.857,
    "SOLARIS all+distill": 0.855,
}


def scored(s: T, base_ne: float, fm_ne: float, transfers: bool = True) -> T:
    """The figure with its NE gain, transfer ratio and intervals around each, as a replay fills them."""
    gain = base_ne - s.ne
    ratio = transfer_ratio(base_ne, s.ne, fm_ne) if transfers else None
    return replace(
        s,
        ne_ci95=[s.ne - 0.004, s.ne + 0.005],
        ne_gain=gain,
        ne_gain_ci95=[gain - 0.006, gain + 0.005],
        transfer_ratio=ratio,
        transfer_ratio_ci95=None if ratio is None else [ratio - 0.06, ratio + 0.05],
    )


def make_report(seed: int = 0) -> ReplayReport:
    """A valid report; the seed moves every figure a little, differently per figure."""
    jitter = 0.002 * seed
    ne = {name: v - jitter * i / 3 for i, (name, v) in enumerate(NE.items())}
    models = [
        scored(ModelScore(n, v, v * 0.45, 0.75 + jitter, None), ne["VM base"], ne["FM"], n != "FM")
        for n, v in ne.items()
    ]
    hours = [
        HourFigures(
            hour=(START + timedelta(hours=i)).isoformat(),
            span="logging" if i < 3 else "eval",
            served=1000 + i,
            coverage={
                "pair": 0.40 + 0.01 * i + jitter,
                "a2a": 0.7 + jitter,
                "agg": 0.86 + jitter,
                "knn": 0.93 + jitter / 2,
                "cohort": 0.95 + jitter / 2,
            },
            hit_rate=None if i == 0 else 0.6 + 0.02 * i,
            fm_calls=200 + 10 * i,
            staleness_hours_mean=None if i == 0 else 1.5 + 0.1 * i,
            candidates=5000 + i,
            covered_candidates=1000 + 20 * i,
            hit_rate_ttl=None if i == 0 else (100 + i) / 400,
            ttl_pairs=0 if i == 0 else 400,
            ttl_hits=0 if i == 0 else 100 + i,
            ttl_pool_requested=0 if i == 0 else 300 + i,
            requested_auc=None if i < 2 else 0.7 + 0.01 * i,
        )
        for i in range(6)
    ]
    sweep = [
        scored(
            SweepPoint(
                top_fraction=f,
                coverage={
                    "pair": 0.2 + f + jitter,
                    "a2a": 0.25 + f + jitter,
                    "agg": 0.6 + f / 2,
                    "knn": 0.7 + f / 2,
                    "cohort": 0.72 + f / 2,
                },
                ne=0.87 - f / 20 - jitter,
                transfer_ratio=None,
                fm_calls_per_served_pair=f * 2,
                fm_calls_per_covered_candidate=f * 3,
            ),
            ne["VM base"],
            ne["FM"],
        )
        for f in SWEEP_FRACTIONS
    ]
    return ReplayReport(
        world="tiny",
        seed=seed,
        spans={"train": "a/b", "logging": "b/c", "eval": "c/d"},
        models=models,
        hours=hours,
        sweep=sweep,
        swept_fractions=list(SWEEP_FRACTIONS),
        fm_calls_per_served_pair=0.21 + jitter,
        staleness_hours={"mean": 1.8, "p50": 1.5, "p90": 3.25, "max": 4.0},
        seconds={"train": 12.5, "logging": 30.0, "eval": 28.0},
        efficiency=pooled_efficiency([h for h in hours if h.span == "eval"]),
        coverage_marginal={"pair": 0.43, "a2a": 0.27, "agg": 0.16, "knn": 0.07},
        tier_contributions=[
            TierContribution("pair", "VM base", "SOLARIS pair", 0.02 + jitter, [0.01, 0.03 + jitter], 0.43),
            TierContribution("a2a", "SOLARIS pair", "SOLARIS +a2a", 0.001, [-0.002, 0.004], 0.27),
            TierContribution("agg", "SOLARIS +a2a", "SOLARIS +agg", -0.01, [-0.015, -0.005], 0.16),
        ],
        slices=[
            Slice("new items", 0.125, 2500, [replace(m, ne=m.ne + 0.03) for m in models]),
            Slice("new users", 0.01, 200, []),
        ],
        users_known=0.267,
        per_vm={
            "ctr": VMFigures("click", None, 5000, 400, models),
            "cvr": VMFigures("conversion", None, 5000, 60, [replace(m, log_loss=m.log_loss / 4) for m in models]),
        },
    )


def _line(text: str, start: str) -> str:
    return next(line for line in text.splitlines() if line.startswith(start))


def test_the_table_shows_every_model_and_figure_beside_the_papers() -> None:
    report = make_report()
    text = table(report)

    for m in report.models:
        row = _line(text, m.name + " ")
        assert f"{m.ne:.4f}" in row and f"{m.auc:.4f}" in row and f"{m.ne_gain:+.4f}" in row
        assert f"[{m.ne_ci95[0]:.4f}, {m.ne_ci95[1]:.4f}]" in row
        if m.transfer_ratio is not None:
            low, high = m.transfer_ratio_ci95
            assert f" {100 * m.transfer_ratio:.1f}% " in row and f"[{100 * low:.1f}%, {100 * high:.1f}%]" in row
    assert "20-25%" in _line(text, "VM distilled") and "42-44%" in _line(text, "SOLARIS all+distill")
    for span in ("logging", "eval"):
        means = span_means(report, span)
        hours = [h for h in report.hours if h.span == span]
        assert means["pair"] == pytest.approx(statistics.fmean(h.coverage["pair"] for h in hours))
        assert f"{100 * means['agg']:.1f}%" in _line(text, "coverage + user aggregate")
        assert f"{100 * means['hit_rate']:.1f}%" in _line(text, "precompute hit rate")
    assert "40-50%" in _line(text, "coverage pair") and "85-90%" in _line(text, "coverage + user aggregate")
    assert f"{report.fm_calls_per_served_pair:.3f}" in _line(text, "FM calls per served pair")
    assert "3.25" in _line(text, "staleness p90")
    e = report.efficiency
    assert f"{100 * e['hit_rate_ttl']:.1f}%" in _line(text, "hit rate while fresh (pooled)")
    assert f"{100 * e['hit_ceiling_ttl']:.1f}%" in _line(text, "its ceiling")
    assert f"{e['requested_auc']:.4f}" in _line(text, "selector AUC, requested while fresh")
    assert f"{e['fm_calls_per_covered_candidate']:.3f}" in _line(text, "FM calls per covered candidate")
    assert f"{e['covered_candidates_per_fm_call']:.3f}" in _line(text, "covered candidates per FM call")
    for p in report.sweep:
        row = _line(text, f"{p.top_fraction:g} ")
        assert f"{p.ne:.4f}" in row and f"{100 * p.coverage['knn']:.1f}%" in row
        assert row.endswith(f"{p.fm_calls_per_covered_candidate:.3f}")
    pair, a2a = (_line(text, label + " ") for label in ("pair", "+ similar items (A2A)"))
    assert "43.0%" in pair and "+0.0200" in pair and "[+0.0100, +0.0300]" in pair and " yes " in pair
    assert "27.0%" in a2a and "[-0.0020, +0.0040]" in a2a and "nothing measurable" in a2a
    assert "SOLARIS +a2a vs SOLARIS pair" in a2a
    assert "a loss" in _line(text, "+ user aggregate ")  # an interval below 0 is not something a tier adds
    assert "26.7%" in _line(text, "users known before their hour") and "the most a user-keyed tier can feed" in text
    new_items = [line for line in text.splitlines() if line.startswith("new items (12.5%, 2,500)")]
    assert [
        next(m for m in ("FM ", "VM base", "VM distilled", "SOLARIS +cohort", "SOLARIS all+distill") if m in line)
        for line in new_items
    ] == ["FM ", "VM base", "VM distilled", "SOLARIS +cohort", "SOLARIS all+distill"]
    assert f"{report.model('FM').ne + 0.03:.4f}" in new_items[0]
    assert "too few to score" in _line(text, "new users (1.0%, 200)")
    assert text.rstrip().endswith("Invariants: all hold")


def test_html_pngs_and_json_are_written_and_linked(tmp_path: Path) -> None:
    report = make_report()
    html = write_html(report, tmp_path / "out")

    page = html.read_text()
    assert html == tmp_path / "out" / "report.html"
    for file in PLOTS:
        png = tmp_path / "out" / file
        assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 1000
        assert f'src="{file}"' in page
    assert all(m.name in page for m in report.models)
    assert "<h2>Precompute efficiency on the evaluation span</h2>" in page
    assert f"<td>{report.efficiency['fm_calls_per_covered_candidate']:.3f}</td>" in page
    written = ReplayReport.from_json((tmp_path / "out" / "report.json").read_text())
    assert written == replace(report, invariants={"checked": list(INVARIANTS), "violated": []})


def test_each_slice_is_scored_on_its_rows_alone_and_a_small_one_is_left_unscored() -> None:
    rng = np.random.default_rng(0)
    n = 4 * MIN_SLICE_EVENTS
    labels = (rng.random(n) < 0.3).astype(np.float32)
    probs = {
        "FM": np.clip(0.3 + 0.3 * (labels - 0.3) + 0.1 * rng.standard_normal(n), 0.01, 0.99),
        "VM base": np.full(n, 0.3),
    }
    requests = np.arange(n) // 4
    rows = np.arange(n)
    slices = {"first half": rows < n // 2, "a few": rows < MIN_SLICE_EVENTS - 1}
    half, few = score_slices(labels, requests, probs, slices, seed=0)
    assert (half.name, half.events, half.share) == ("first half", n // 2, 0.5)
    mask = slices["first half"]
    assert half.models == score_models(labels[mask], requests[mask], {k: p[mask] for k, p in probs.items()}, 0)
    assert half.models != score_models(labels, requests, probs, 0)
    assert (few.events, few.models) == (MIN_SLICE_EVENTS - 1, [])


def test_json_round_trip() -> None:
    report = make_report(seed=3)

    assert ReplayReport.from_json(report.to_json()) == report


def test_efficiency_pools_the_eval_hours() -> None:
    """Hits over pairs across hours, not a mean of rates; the AUC averaged where defined; FM calls over the
    candidate rows the pair tier covered (not over shown impressions)."""
    e = make_report().efficiency
    assert e == {
        "hit_rate_ttl": (103 + 104 + 105) / 1200,
        "hit_ceiling_ttl": (303 + 304 + 305) / 1200,
        "requested_auc": pytest.approx(statistics.fmean([0.73, 0.74, 0.75])),
        "fm_calls": 230 + 240 + 250,
        "covered_candidates": 1060 + 1080 + 1100,
        "fm_calls_per_covered_candidate": 720 / 3240,
        "covered_candidates_per_fm_call": 3240 / 720,
    }
    nothing = HourFigures("h", "eval", 0, {}, None, 0, None)
    assert set(pooled_efficiency([nothing]).values()) == {None, 0}
    # A pool with more requested pairs than were written caps the ceiling at every pair hit; an hour whose run
    # scored no pool (a shadow's) is left out of the ceiling, not counted as a pool with nothing requested.
    hours = make_report().hours[3:]
    assert pooled_efficiency([replace(h, ttl_pool_requested=5000) for h in hours])["hit_ceiling_ttl"] == 1.0
    assert (
        pooled_efficiency([replace(hours[0], ttl_pool_requested=None), *hours[1:]])["hit_ceiling_ttl"]
        == (304 + 305) / 800
    )


def test_a_report_json_from_before_the_efficiency_figures_still_reads() -> None:
    raw = json.loads(make_report().to_json())
    raw.pop("efficiency")
    for hour in raw["hours"]:
        for name in (
            "candidates",
            "covered_candidates",
            "hit_rate_ttl",
            "ttl_pairs",
            "ttl_hits",
            "ttl_pool_requested",
            "requested_auc",
        ):
            hour.pop(name)
    for point in raw["sweep"]:
        point.pop("fm_calls_per_covered_candidate")

    old = ReplayReport.from_json(json.dumps(raw))

    assert old.efficiency == {} and old.hours[1].hit_rate_ttl is None and old.hours[1].covered_candidates == 0
    assert old.hours[1].ttl_pool_requested is None
    assert old.sweep[0].fm_calls_per_covered_candidate is None
    assert check_invariants(old) == [] and "Precompute efficiency" not in table(old)


def test_a_valid_report_holds_every_invariant() -> None:
    assert check_invariants(make_report()) == []
    assert check_invariants(make_report(seed=2)) == []


def _hour(report: ReplayReport, i: int, **coverage: float) -> ReplayReport:
    hours = list(report.hours)
    hours[i] = replace(hours[i], coverage=hours[i].coverage | coverage)
    return replace(report, hours=hours)


def _sweep_point(report: ReplayReport, i: int, **coverage: float) -> ReplayReport:
    sweep = list(report.sweep)
    sweep[i] = replace(sweep[i], coverage=sweep[i].coverage | coverage)
    return replace(report, sweep=sweep)


def _model(report: ReplayReport, name: str, **changes: float) -> ReplayReport:
    return replace(report, models=[replace(m, **changes) if m.name == name else m for m in report.models])


BROKEN: dict[str, tuple[Callable[[ReplayReport], ReplayReport], str]] = {
    "nan deep in the staleness": (
        lambda r: replace(r, staleness_hours=r.staleness_hours | {"p90": math.nan}),
        "report.staleness_hours.p90 is nan",
    ),
    "inf in a sweep point": (
        lambda r: replace(r, sweep=[*r.sweep[:2], replace(r.sweep[2], fm_calls_per_served_pair=math.inf), r.sweep[3]]),
        "report.sweep[2].fm_calls_per_served_pair is inf",
    ),
    "agg below pair in one hour": (
        lambda r: _hour(r, 4, agg=0.3),
        f"coverage by tier, hour {(START + timedelta(hours=4)).isoformat()}: pair",
    ),
    "the tiers after pair add nothing": (
        lambda r: replace(
            r, hours=[replace(h, coverage=dict.fromkeys(h.coverage, h.coverage["pair"])) for h in r.hours]
        ),
        "the tiers after pair add nothing",
    ),
    "a tier missing": (
        lambda r: replace(r, hours=[replace(r.hours[0], coverage={"pair": 0.4, "agg": 0.8}), *r.hours[1:]]),
        "lacks coverage tier(s) a2a, knn, cohort",
    ),
    "every-tier coverage falls in the sweep": (lambda r: _sweep_point(r, 2, cohort=0.5), "cohort coverage falls"),
    "pair coverage falls in the sweep": (lambda r: _sweep_point(r, 3, pair=0.1), "pair coverage falls"),
    "a fraction missing from the sweep": (lambda r: replace(r, sweep=r.sweep[:3]), "fractions [0.05, 0.1, 0.2]"),
    "the requested sweep not run": (lambda r: replace(r, sweep=[]), "fractions [], expected [0.05, 0.1, 0.2, 0.4]"),
    "an hour hits more pairs than its pool had requested": (
        lambda r: replace(r, hours=[*r.hours[:4], replace(r.hours[4], ttl_pool_requested=50), *r.hours[5:]]),
        "104 pairs hit while fresh, above the 50 its pool had requested",
    ),
    "base transfer ratio not 0": (lambda r: _model(r, "VM base", transfer_ratio=0.01), "'VM base' is 0.01, not 0"),
    "no base VM": (lambda r: replace(r, models=r.models[:1]), "no 'VM base' model"),
    "an NE outside its interval": (
        lambda r: _model(r, "SOLARIS pair", ne_ci95=[0.80, 0.81]),
        "model 'SOLARIS pair': NE 0.8700 lies outside its interval [0.8, 0.81]",
    ),
    "an interval missing": (
        lambda r: _model(r, "VM distilled", ne_gain_ci95=None),
        "model 'VM distilled': ne_gain_ci95 is None, not an interval",
    ),
    "a transfer ratio without its interval": (
        lambda r: _model(r, "SOLARIS +agg", transfer_ratio_ci95=None),
        "model 'SOLARIS +agg': transfer ratio 0.3400 has no interval",
    ),
    "an FM gain within its interval's width": (
        lambda r: replace(
            r,
            models=[
                replace(m, transfer_ratio=None, transfer_ratio_ci95=None, ne_gain_ci95=[0.0, 0.2])
                if m.name == "FM"
                else replace(m, transfer_ratio=None, transfer_ratio_ci95=None)
                for m in r.models
            ],
            sweep=[],
            swept_fractions=[],
        ),
        "the FM's NE gain over the base VM, 0.1000, is no larger than its 95% interval's width, 0.2000",
    ),
}


@pytest.mark.parametrize("case", BROKEN)
def test_each_broken_invariant_is_named(case: str) -> None:
    breaks, sentence = BROKEN[case]
    broken = breaks(make_report())

    violations = check_invariants(broken)

    assert len(violations) == 1 and sentence in violations[0], violations
    assert sentence in table(broken) and "Invariants violated" in table(broken)


def test_a_saturated_every_tier_coverage_may_dip_by_a_handful_of_candidates() -> None:
    report = make_report()
    below = report.sweep[1].coverage["cohort"] - SATURATED_DIP
    assert check_invariants(_sweep_point(report, 2, cohort=below + 1e-6)) == []
    assert "cohort coverage falls" in check_invariants(_sweep_point(report, 2, cohort=below - 1e-6))[0]
    assert (
        "pair coverage falls"
        in check_invariants(_sweep_point(report, 2, pair=report.sweep[1].coverage["pair"] - 1e-6))[0]
    )


def test_every_violation_is_reported_at_once(tmp_path: Path) -> None:
    report = make_report()
    for case in ("nan deep in the staleness", "agg below pair in one hour", "every-tier coverage falls in the sweep"):
        report = BROKEN[case][0](report)
    report = BROKEN["base transfer ratio not 0"][0](report)

    assert len(check_invariants(report)) == 4
    assert "VM base&#39; is 0.01, not 0</li>" in write_html(report, tmp_path).read_text()  # escaped, listed


def test_an_empty_report_still_renders_and_says_what_is_missing(tmp_path: Path) -> None:
    empty = replace(make_report(), hours=[], sweep=[], models=[])

    violations = check_invariants(empty)

    assert any("no hours" in v for v in violations) and any("fractions []" in v for v in violations)
    assert any("no 'VM base' model" in v for v in violations)
    assert "Invariants violated" in table(empty)
    write_html(empty, tmp_path)
    assert all((tmp_path / file).stat().st_size > 0 for file in PLOTS)


def test_seed_spreads_are_mean_and_sample_sd_of_the_inputs() -> None:
    reports = [make_report(seed) for seed in (0, 1, 2, 5)]

    spreads = seed_spreads(reports)

    for name in NE:
        nes = [r.model(name).ne for r in reports]
        s = spreads["NE"][name]
        assert s.mean == pytest.approx(statistics.fmean(nes)) and s.sd == pytest.approx(statistics.stdev(nes))
        assert (s.lo, s.hi) == (min(nes), max(nes))
    assert "FM" not in spreads["transfer ratio"]
    ratios = [r.model("SOLARIS +cohort").transfer_ratio for r in reports]
    assert spreads["transfer ratio"]["SOLARIS +cohort"].sd == pytest.approx(statistics.stdev(ratios))
    for tier in CUMULATIVE_TIERS:
        per_seed = [statistics.fmean(h.coverage[tier] for h in r.hours if h.span == "eval") for r in reports]
        assert spreads["coverage, eval span"][tier].mean == pytest.approx(statistics.fmean(per_seed))
    sweep_ne = [next(p.ne for p in r.sweep if p.top_fraction == 0.1) for r in reports]
    assert spreads["sweep NE"]["0.1"].sd == pytest.approx(statistics.stdev(sweep_ne))

    text = seeds_table(reports)
    distilled = spreads["NE"]["VM distilled"]
    assert f"{distilled.mean:.4f} ± {distilled.sd:.4f} ({distilled.lo:.4f}..{distilled.hi:.4f})" in text
    assert all(name in text for name in NE) and "seeds 0, 1, 2, 5" in text


def test_a_preset_generated_per_seed_is_one_world() -> None:
    reports = [replace(make_report(seed), world=f"tiny-seed{seed}") for seed in (0, 1)]

    assert seeds_table(reports).startswith("SOLARIS replay: world tiny, seeds 0, 1")
    with pytest.raises(ValueError, match="different worlds: tiny and tiny-seed2"):
        seeds_table([reports[0], replace(reports[1], world="tiny-seed2")])


def test_one_seed_has_no_spread() -> None:
    spread = seed_spreads([make_report()])["NE"]["FM"]

    assert spread.sd is None and spread.mean == spread.lo == spread.hi == NE["FM"]
    assert f"{NE['FM']:.4f} ± —" in seeds_table([make_report()])


@pytest.mark.parametrize(
    ("reports", "message"),
    [
        ([], "needs at least one"),
        ([make_report(0), replace(make_report(1), world="ml100k")], "different worlds: tiny and ml100k"),
        ([make_report(1), make_report(1)], "a seed appears twice"),
        ([make_report(0), replace(make_report(1), sweep=make_report(1).sweep[:3])], "other top_fractions"),
        ([make_report(0), replace(make_report(1), models=make_report(1).models[:3])], "seed 1 has models"),
    ],
)
def test_seeds_that_cannot_be_compared_are_refused(reports: list[ReplayReport], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        seeds_table(reports)


def test_a_replay_without_a_sweep_asked_for_none() -> None:
    assert check_invariants(replace(make_report(), sweep=[], swept_fractions=[])) == []


def fm_not_beating_base(report: ReplayReport) -> ReplayReport:
    """The report of a seed where the FM lost to the base VM: no transfer ratio anywhere."""
    base = report.model("VM base").ne
    fm_ne = base + 0.01
    no_ratio = {"transfer_ratio": None, "transfer_ratio_ci95": None}
    models = [
        replace(m, ne=fm_ne, ne_ci95=[fm_ne - 0.004, fm_ne + 0.005], ne_gain=-0.01, **no_ratio)
        if m.name == "FM"
        else replace(m, **no_ratio)
        for m in report.models
    ]
    return replace(report, models=models, sweep=[replace(p, **no_ratio) for p in report.sweep])


def test_an_fm_that_does_not_beat_the_base_vm_is_said_not_crashed() -> None:
    report = fm_not_beating_base(make_report())

    violations = check_invariants(report)

    assert len(violations) == 1 and "the FM does not beat the base VM (NE 0.9100 against 0.9000)" in violations[0]
    assert "Models on the evaluation span (transfer ratio undefined: the FM does not beat the base VM)" in table(report)


def test_seeds_without_a_transfer_ratio_are_left_out_of_its_spread_and_named() -> None:
    reports = [make_report(0), fm_not_beating_base(make_report(1)), make_report(2)]

    spreads = seed_spreads(reports)
    text = seeds_table(reports)

    expected = [r.model("SOLARIS pair").transfer_ratio for r in (reports[0], reports[2])]
    assert spreads["transfer ratio"]["SOLARIS pair"].mean == pytest.approx(statistics.fmean(expected))
    assert spreads["NE"]["SOLARIS pair"].mean == pytest.approx(
        statistics.fmean(r.model("SOLARIS pair").ne for r in reports)
    )
    assert "seed 1: transfer ratio undefined: the FM does not beat the base VM; transfer over the other seeds" in text


def test_solaris_replay_exits_non_zero_when_a_seed_breaks_an_invariant(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from solaris.cli import main
    from solaris.eval import job

    reports = {0: make_report(0), 1: _model(make_report(1), "VM base", transfer_ratio=0.01)}
    reports = {seed: replace(r, curve=CURVE, world="w") for seed, r in reports.items()}
    folder = tmp_path / "replay"

    def replay_one(settings: object, request: object, seed: int) -> Path:
        write_html(reports[seed], folder / f"seed-{seed}" / "report")
        return folder / f"seed-{seed}" / "report"

    monkeypatch.setattr(job, "replay_one", replay_one)
    monkeypatch.setenv("SOLARIS_HOME", str(tmp_path))
    assert main(["replay", "--preset", "tiny", "--seeds", "0", "--no-sweep", "--no-plan"]) == 0
    assert not (folder / "plan").exists()
    assert main(["replay", "--preset", "tiny", "--seeds", "0", "1", "--no-sweep"]) == 1
    assert f"invariants violated in {folder / 'seed-1' / 'report'}" in capsys.readouterr().err
    # The plan stands on its own intervals: made whatever invariant a seed broke.
    assert json.loads((folder / "plan" / "plan.json").read_text())["seeds"] == [0, 1]


def test_every_vm_has_its_rows_and_the_summary_names_the_best_relative_gain() -> None:
    report = make_report()
    text = table(report)

    ctr, cvr = report.per_vm["ctr"], report.per_vm["cvr"]
    row = _line(text, "ctr (click; 5,000 events, 400 positive)")
    assert " FM " in row and f"{ctr.model('FM').ne:.4f}" in row  # each VM's rows open with the FM's matching head
    solaris = next(line for line in text.splitlines() if line.startswith("ctr (") and ALL_TIERS in line)
    assert (
        f"{ctr.model(ALL_TIERS).ne:.4f}" in solaris and f"{100 * ctr.model(ALL_TIERS).transfer_ratio:.1f}%" in solaris
    )
    assert "cvr (conversion; 5,000 events, 60 positive)" in text  # the rare label's count, beside its intervals
    gains = [(v.model(VM_BASE).log_loss - v.model(ALL_TIERS).log_loss) / v.model(VM_BASE).log_loss for v in (ctr, cvr)]
    assert f"up to {100 * max(gains):.1f}% relative log loss across 2 VMs" in text
