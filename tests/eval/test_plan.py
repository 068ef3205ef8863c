"""The capacity plan on hand-built curves whose knee is known, and ``solaris plan`` on written replays."""

from __future__ import annotations

import json
from dataclasses import replace
from pathlib import Path

import pytest
from plan_curves import BUDGET_CURVE, CURVE, budget_at, point, report, verifier

import mlflow
from solaris.cli import main
from solaris.config import Settings
from solaris.eval.figures import ReplayReport
from solaris.eval.plan import Plan, PlanError, make_plan
from solaris.eval.protocol import seed_world
from solaris.eval.report.plan_view import plan_text
from solaris.precompute.params import PrecomputeParams


def test_the_knee_is_the_least_spend_within_the_target() -> None:
    plan = make_plan([report(CURVE)], target=0.001)
    assert plan.selector.planned == "budget"
    assert plan.knee is not None
    assert (plan.knee.fm_budget, plan.knee.ttl_hours) == (4_000, 4)
    assert plan.knee.fm_calls_per_day == 96_000
    assert plan.knee.label == "budget at top 0.2's spend, ttl 4 h"
    assert plan.full_budget == "budget at top 0.4's spend, ttl 4 h"
    # A looser target moves the knee down the curve.
    assert make_plan([report(CURVE)], target=0.005).knee.fm_budget == 2_000  # type: ignore[union-attr]
    assert make_plan([report(CURVE)], target=0.02).knee.fm_budget == 1_000  # type: ignore[union-attr]


def test_at_one_spend_the_ttl_that_loses_less_is_the_knee() -> None:
    longer = point("top 0.1", 2_000, 0.0008, (0.0001, 0.0015), ttl_hours=8)
    plan = make_plan([report([*CURVE, longer])], target=0.001)
    assert plan.knee is not None
    assert (plan.knee.fm_budget, plan.knee.ttl_hours) == (2_000, 8)
    # A run refuses a demand model trained for another TTL: the plan says which to train first.
    assert "first: train the demand model for it: solaris train demand --ttl-hours 8" in plan_text(plan)


def test_the_plan_is_measured_against_the_planned_selectors_full_budget() -> None:
    top = point("top 0.4", 8_000, 0.0, (0.0, 0.0), selector="verifier", fm_budget=None, top_fraction=0.4)
    plan = make_plan([report([*CURVE, top])])
    assert plan.selector.planned == "budget" and plan.full_budget == "budget at top 0.4's spend, ttl 4 h"
    assert sorted(a.label for a in plan.arms if a.full_budget) == [
        plan.full_budget,
        "verifier at top 0.4's spend, ttl 4 h",
    ]
    assert plan_text(plan).count("full budget\n") == 2  # each selector's reference marked in the table


def test_a_replay_that_measured_both_selectors_against_one_arm_is_refused() -> None:
    older = [replace(p, full_budget=False) for p in CURVE]
    with pytest.raises(PlanError, match=r"seed\(s\) 1 measured its arms against one full budget .*replay again"):
        make_plan([report(CURVE, 0), report(older, 1)])


def test_a_floor_that_spends_less_for_as_much_is_the_knee() -> None:
    floored = point("top 0.4", 3_000, 0.0002, (-0.0003, 0.0007), fm_budget=8_000, min_demand=0.2)
    plan = make_plan([report([*CURVE, floored])], target=0.001)
    assert plan.knee is not None
    assert (plan.knee.fm_budget, plan.knee.min_demand) == (8_000, 0.2)
    assert plan.knee.fm_calls_per_day == 72_000
    assert plan.knee.label == "budget at top 0.4's spend, ttl 4 h, min_demand 0.2"


def test_no_recommendation_where_the_intervals_overlap() -> None:
    flat = [point(spend, calls, loss / 10, (-0.002, 0.002)) for spend, calls, loss, _ in BUDGET_CURVE]
    plan = make_plan([report(flat)])
    assert plan.knee is None
    assert plan.verdict.startswith("flat within noise")
    assert plan.operating_point.past_knee is None


def test_an_arm_is_separated_only_where_every_seed_says_so() -> None:
    # Seed 1's cheap arms overlap zero: pooled, no arm is beyond its interval on every seed.
    overlapping = [replace(p, ne_loss_ci95=[-0.001, p.ne_loss_ci95[1]]) for p in CURVE]
    plan = make_plan([report(CURVE, 0), report(overlapping, 1)])
    assert plan.seeds == [0, 1]
    assert plan.knee is None
    pooled = {a.spend: a for a in plan.arms}
    assert pooled["top 0.2 / 3"].ne_loss_ci95 == [-0.001, 0.012] and pooled["top 0.2 / 3"].seeds == 2


def test_the_verifier_is_planned_where_the_budget_selector_does_not_beat_it() -> None:
    ties = [verifier(2_000, 0.1), budget_at(2_000, 0.0005, (-0.001, 0.002))]
    verifier_arms = [
        point("top 0.05", 1_500, 0.006, (0.004, 0.008), selector="verifier", fm_budget=None, top_fraction=0.05),
        point("top 0.4", 8_000, 0.0, (0.0, 0.0), selector="verifier", fm_budget=None, top_fraction=0.4),
    ]
    plan = make_plan([report([*CURVE, *verifier_arms], speculation=ties)])
    assert plan.selector.planned == "verifier"
    assert "does not beat the verifier" in plan.selector.reason
    assert plan.knee is not None
    assert (plan.knee.selector, plan.knee.top_fraction) == ("verifier", 0.4)
    assert plan.operating_point.past_knee is None and "recommends the verifier" in plan.operating_point.sentence


def test_todays_budget_past_the_knee_is_said() -> None:
    plan = make_plan([report(CURVE)], today=PrecomputeParams(fm_budget=60_000))
    assert plan.operating_point.past_knee is True
    assert make_plan([report(CURVE)], today=PrecomputeParams(fm_budget=4_000)).operating_point.past_knee is False


def test_a_presets_seeds_each_generated_as_its_own_world_make_one_plan() -> None:
    seeds = [replace(report(CURVE, seed), world=seed_world("default", seed)) for seed in (0, 1)]
    plan = make_plan(seeds)
    assert (plan.world, plan.seeds) == ("default", [0, 1])
    with pytest.raises(PlanError, match="a plan is of one world; these replays are of churn, default"):
        make_plan([seeds[0], replace(report(CURVE, 1), world=seed_world("churn", 1))])


@pytest.mark.parametrize(
    ("reports", "message"),
    [
        ([], "no replay reports"),
        ([report([])], "ran no arms to plan from"),
        ([report(CURVE), replace(report(CURVE, 1), world="other")], "a plan is of one world"),
        ([report(CURVE), report(CURVE[1:], 1)], "ran different arms"),
    ],
)
def test_a_plan_refuses_what_it_cannot_plan_from(reports: list[ReplayReport], message: str) -> None:
    with pytest.raises(PlanError, match=message):
        make_plan(reports)


def write_replay(root: Path, *reports: ReplayReport) -> None:
    for r in reports:
        folder = root / f"seed-{r.seed}" / "report"
        folder.mkdir(parents=True)
        r.write_json(folder / "report.json")


def test_solaris_plan_writes_the_plan_and_logs_it(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "replay"
    write_replay(root, report(CURVE, 0), report(CURVE, 1))
    assert main(["plan", str(root), "--target", "0.001"]) == 0
    out = capsys.readouterr().out
    assert "the knee: budget at top 0.2's spend" in out and "fm_budget 4,000, ttl_hours 4" in out
    assert "commit abc123" in out and "seeds 0, 1" in out
    assert {p.name for p in (root / "plan").iterdir()} == {"plan.json", "plan.png", "plan.txt"}
    mlflow.set_tracking_uri(settings.mlflow_tracking_uri)
    (run,) = mlflow.search_runs(experiment_names=["solaris-plan"], output_format="list")
    assert run.data.params["recommended_fm_budget"] == "4000"


@pytest.mark.parametrize(
    ("layout", "message"),
    [
        (None, "no replay at"),
        ([], "holds no replay"),
        ([0, 1], "is partial: seed-1 has no report/report.json"),
    ],
)
def test_solaris_plan_refuses_a_missing_or_partial_replay(
    settings: Settings, tmp_path: Path, capsys: pytest.CaptureFixture[str], layout: list[int] | None, message: str
) -> None:
    root = tmp_path / "replay"
    if layout is not None:
        root.mkdir()
        write_replay(root, *(report(CURVE, s) for s in layout[:1]))
        for seed in layout[1:]:
            (root / f"seed-{seed}").mkdir()
    assert main(["plan", str(root)]) == 2
    assert message in capsys.readouterr().err


def test_a_plan_reads_back_as_written_and_a_malformed_one_is_refused() -> None:
    plan = make_plan([report(CURVE)])
    assert Plan.from_dict(json.loads(json.dumps(plan.as_dict()))) == plan
    with pytest.raises(PlanError, match="not a plan SOLARIS wrote"):
        Plan.from_dict({"world": "x"})


def test_the_demand_models_validation_auc_is_held_to_productions_floor() -> None:
    def with_auc(auc: float, seed: int) -> ReplayReport:
        protocol = {"precompute": {"ttl_hours": 4}}
        return replace(report(CURVE, seed), protocol=protocol, demand_valid_auc={"4": auc, "8": 0.99})

    weak = make_plan([with_auc(0.64, 0), with_auc(0.66, 1)]).selector
    assert weak.valid_auc == pytest.approx(0.65) and weak.under_floor is True
    strong = make_plan([with_auc(0.80, 0)], today=PrecomputeParams(demand_auc_floor=0.7)).selector
    assert (strong.valid_auc, strong.under_floor) == (0.80, False)
    assert make_plan([report(CURVE)]).selector.under_floor is None  # no budget arm's model recorded


def test_a_planned_selector_without_arms_recommends_nothing() -> None:
    ties = [verifier(2_000, 0.1), budget_at(2_000, 0.0, (-0.001, 0.001))]  # the verifier is planned...
    plan = make_plan([report(CURVE, speculation=ties)])  # ...but only budget arms ran
    assert plan.knee is None and plan.verdict == "no arm of the verifier selector ran: nothing to recommend"
