"""`solaris replay --preset tiny` end to end, as CI runs it: the report's invariants, its files, its MLflow
record, the FM's daily refresh (a new embedding version mid-replay, never mixed with another in what was
served) and the no-leakage contract (each FM version trained only before it serves; embeddings served no
older than their TTL and never from the future)."""

from __future__ import annotations

import json
import sqlite3
from datetime import datetime, timedelta

import numpy as np
import pyarrow.compute as pc
import pytest

import mlflow
from solaris.cli import main
from solaris.config import Settings
from solaris.embedding_version import parse_embedding_version
from solaris.enrichment.tiers import FED_BY
from solaris.eval.figures import ReplayReport
from solaris.eval.job import EXPERIMENT
from solaris.eval.report import INVARIANTS, check_invariants
from solaris.models.features import ts_micros
from solaris.precompute.params import PrecomputeParams
from solaris.serving.servedlog import read_served
from solaris.store.codec import to_micros
from solaris.tracking.registry import CHAMPION, FM_MODEL, SHADOW
from solaris.training.jobs import TRAINED_UNTIL
from solaris.vms import DEFAULT_VMS

LEAD = DEFAULT_VMS[0]
GRID_TTL = 8

# The replay fixture (train, two FM refreshes, the eval span, the sweep and the selector arms) is one setup of
# about 8 minutes on 2 cores (870 s measured beside two other replays, past the suite's 600 s default): a long
# end-to-end run, so it runs with the integration suite (.ci/run runs both), not in the default one.
pytestmark = [pytest.mark.integration, pytest.mark.timeout(1500)]


@pytest.fixture(scope="module")
def replayed(tmp_path_factory: pytest.TempPathFactory) -> tuple[Settings, ReplayReport]:
    home = tmp_path_factory.mktemp("replay")
    settings = Settings.from_env({"SOLARIS_HOME": str(home)})
    with pytest.MonkeyPatch.context() as env:
        env.setenv("SOLARIS_HOME", str(home))
        # The sweep arms serve the eval span's last 6 hours after 4 warm-up hours, and the plan's grid one TTL
        # besides the default: the suite's time budget.
        argv = ["--sweep-warmup-hours", "4", "--sweep-hours", "6", "--plan-ttl-hours", str(GRID_TTL)]
        argv += ["--plan-min-demand"]  # no floor arm (test_capacity.py declares them)
        assert main(["replay", "--preset", "tiny", *argv]) == 0
    folder = settings.data_dir / "replay" / "tiny" / "seed-0" / "report"
    return settings, ReplayReport.from_json((folder / "report.json").read_text())


def test_the_report_holds_its_invariants(replayed: tuple[Settings, ReplayReport]) -> None:
    report = replayed[1]
    assert check_invariants(report) == []
    assert report.model("VM base").transfer_ratio == 0
    for hour in report.hours:
        shares = [hour.coverage[t] for t in FED_BY]
        assert shares == sorted(shares)
        assert list(hour.coverage_marginal) == list(FED_BY)
        assert list(hour.coverage_marginal.values()) == pytest.approx(list(np.diff([0.0, *shares])))
    sweep = sorted(report.sweep, key=lambda p: p.top_fraction)
    assert [p.top_fraction for p in sweep] == [0.05, 0.1, 0.2, 0.4]
    assert all(a.coverage["pair"] <= b.coverage["pair"] for a, b in zip(sweep, sweep[1:]))


def test_every_model_is_scored_on_the_same_eval_span(replayed: tuple[Settings, ReplayReport]) -> None:
    report = replayed[1]
    names = [m.name for m in report.models]
    assert names == [
        "FM",
        "FM as precomputed",
        "FM as precomputed, at served position (ablation)",
        "VM base",
        "VM distilled",
        "SOLARIS pair",
        "SOLARIS +a2a",
        "SOLARIS +agg",
        "SOLARIS +knn",
        "SOLARIS +cohort",
        "SOLARIS all but a2a (ablation)",
        "SOLARIS all+distill",
    ]
    assert {h.span for h in report.hours} == {"logging", "eval"}


def test_every_vm_is_refreshed_and_scored_on_its_own_label(replayed: tuple[Settings, ReplayReport]) -> None:
    """ctr and cvr on the same served events (one table, the lead's served inputs): the lead's table is the
    headline, cvr's is scored on conversions, with its (small) count of positives beside its intervals."""
    report = replayed[1]
    ctr, cvr = report.per_vm["ctr"], report.per_vm["cvr"]
    assert list(report.per_vm) == ["ctr", "cvr"] and ctr.models == report.models
    assert (ctr.label, cvr.label) == ("click", "conversion") and ctr.events == cvr.events > 0
    assert 0 < cvr.positives < ctr.positives  # a conversion follows a click
    assert [m.name for m in cvr.models] == [m.name for m in ctr.models]
    for m in cvr.models:
        assert m.ne_ci95[0] <= m.ne <= m.ne_ci95[1], m.name
    assert cvr.model("FM").ne != ctr.model("FM").ne  # the FM's conversion head, not its click head


def test_every_figure_has_its_interval_and_the_report_states_its_protocol(
    replayed: tuple[Settings, ReplayReport],
) -> None:
    report = replayed[1]
    base = report.model("VM base").ne
    for m in report.models:
        assert m.ne_ci95[0] <= m.ne <= m.ne_ci95[1], m.name
        assert m.ne_gain == pytest.approx(base - m.ne) and m.ne_gain_ci95[0] <= m.ne_gain_ci95[1], m.name
        assert (m.transfer_ratio is None) == (m.transfer_ratio_ci95 is None), m.name
    assert all(p.ne_ci95 and p.ne_gain_ci95 for p in report.sweep)
    assert report.protocol["fm_refresh"] == "daily" and "fine-tuned daily" in report.protocol["fm_reference"]
    assert report.protocol["vms_left_out"] == {}  # the tiny world has clicks and conversions
    assert report.protocol["precompute"]["cohort_items"] == PrecomputeParams.cohort_items
    assert report.invariants == {"checked": list(INVARIANTS), "violated": []}


def test_the_ids_the_serving_fm_never_trained_on_are_scored_apart(replayed: tuple[Settings, ReplayReport]) -> None:
    """Users sign up all through the tiny world, so some evaluation impressions are of users the serving FM
    never trained on; each slice scores the main table's models on its own rows."""
    report = replayed[1]
    assert [c.name for c in report.slices] == ["new items", "new users"]
    new_users = report.slices[1]
    assert 0 < new_users.share < 0.5 and new_users.events > 0
    assert [m.name for m in new_users.models] == [m.name for m in report.models]
    for m in new_users.models:
        assert m.ne_ci95[0] <= m.ne <= m.ne_ci95[1], m.name
    assert new_users.models[0].ne != report.models[0].ne


def test_each_tier_reports_its_marginal_coverage_and_ne_contribution(replayed: tuple[Settings, ReplayReport]) -> None:
    """Down the feeding order, each tier's NE gain is the ladder's step (the base VM before the first tier),
    with a paired interval; the A2A tier feeds served pairs on the tiny world."""
    report = replayed[1]
    contributions = report.tier_contributions
    assert [c.tier for c in contributions] == list(FED_BY) == list(report.coverage_marginal)
    for c in contributions:
        assert c.ne_gain == pytest.approx(report.model(c.without).ne - report.model(c.with_tier).ne)
        assert c.ne_gain_ci95[0] <= c.ne_gain <= c.ne_gain_ci95[1], c.tier
        assert c.coverage_marginal == report.coverage_marginal[c.tier]
    assert contributions[0].without == "VM base" and contributions[-1].with_tier == "SOLARIS +cohort"
    assert report.coverage_marginal["a2a"] > 0


def test_no_embedding_comes_from_the_future_or_from_the_fms_training_labels(
    replayed: tuple[Settings, ReplayReport],
) -> None:
    report = replayed[1]
    train_end = datetime.fromisoformat(report.spans["train"].split("/")[1])
    logging_start = datetime.fromisoformat(report.spans["logging"].split("/")[0])
    assert train_end <= logging_start
    assert 0 <= report.staleness_hours["p50"] <= report.staleness_hours["max"] <= 4  # the replay's TTL


def test_the_efficiency_figures_count_candidates_and_hits_while_fresh(replayed: tuple[Settings, ReplayReport]) -> None:
    report = replayed[1]
    e, hours = report.efficiency, [h for h in report.hours if h.span == "eval"]
    assert e["fm_calls"] == sum(h.fm_calls for h in hours) > 0
    assert e["covered_candidates"] == sum(h.covered_candidates for h in hours) > 0
    assert all(h.covered_candidates <= h.candidates for h in report.hours)
    assert e["fm_calls_per_covered_candidate"] == pytest.approx(e["fm_calls"] / e["covered_candidates"])
    # Measured, not asserted good: on the tiny world the click-trained VM ranks requests near chance (~0.51).
    assert 0 < e["hit_rate_ttl"] <= 1 and 0 < e["requested_auc"] < 1
    assert e["hit_rate_ttl"] == pytest.approx(sum(h.ttl_hits for h in hours) / sum(h.ttl_pairs for h in hours))
    # Its ceiling: the written pairs come from the scored pool, so no hour hits more than its pool had requested;
    # the hours after the promotion judge the shadow's codes, whose run scored no pool: left out, not zero.
    known = [h for h in hours if h.ttl_pool_requested is not None]
    assert known and all(h.ttl_hits <= h.ttl_pool_requested for h in known)
    unknown = [h for h in report.hours if h.ttl_pool_requested is None]
    assert all(h.ttl_pairs > 0 for h in unknown)
    ceiling = sum(h.ttl_pool_requested for h in known) / sum(h.ttl_pairs for h in known)
    assert e["hit_ceiling_ttl"] == pytest.approx(min(1.0, ceiling))
    # A pair is a hit in any hour of its TTL, so never less often than in the hour it was written for: the
    # pairs whose TTL (4 h) ends with hour h were written 3 hours before it.
    written = {h.hour: h.hit_rate for h in report.hours}
    pairs = [
        (written.get((datetime.fromisoformat(h.hour) - timedelta(hours=3)).isoformat()), h.hit_rate_ttl)
        for h in report.hours
    ]
    pairs = [(same_hour, ttl) for same_hour, ttl in pairs if same_hour is not None and ttl is not None]
    assert pairs and all(same_hour <= ttl for same_hour, ttl in pairs)
    assert all(p.fm_calls_per_covered_candidate is not None for p in report.sweep)


def test_the_report_is_written_and_logged_to_mlflow(replayed: tuple[Settings, ReplayReport]) -> None:
    settings = replayed[0]
    folder = settings.data_dir / "replay" / "tiny" / "seed-0" / "report"
    assert (folder / "report.html").stat().st_size > 0
    assert sorted(p.name for p in folder.glob("*.png"))
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri)
    runs = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])
    assert len(runs) == 1 and "ne_fm" in runs[0].data.metrics
    assert runs[0].data.metrics["efficiency_fm_calls_per_covered_candidate"] > 0
    artifacts = {a.path for a in client.list_artifacts(runs[0].info.run_id, "report")}
    assert "report/report.html" in artifacts and "report/report.json" in artifacts


def first_serving_hours(report: ReplayReport) -> list[datetime]:
    return [datetime.fromisoformat(v["first_serving_hour"]) for v in report.fm_versions]


def test_a_refreshed_fm_serves_from_mid_replay_and_served_features_never_mix_versions(
    replayed: tuple[Settings, ReplayReport],
) -> None:
    settings, report = replayed
    logging_start, eval_start = (datetime.fromisoformat(report.spans[s].split("/")[0]) for s in ("logging", "eval"))
    starts = first_serving_hours(report)
    assert starts[0] == logging_start and len(starts) == 2 and logging_start < starts[1] < eval_start
    versions = [v["embedding_version"] for v in report.fm_versions]
    assert len(set(versions)) == len(versions)
    state = settings.data_dir / "replay" / "tiny" / "seed-0" / "state"
    end = datetime.fromisoformat(report.spans["eval"].split("/")[1])
    served = read_served(
        state / "main" / "var" / "served" / LEAD.name, logging_start, end, parse_embedding_version(versions[0]).dim
    )
    # Each served row carries the version that served its hour, and only that one.
    serving = (
        np.searchsorted([to_micros(s, "first_serving_hour") for s in starts], ts_micros(served["ts"]), side="right") - 1
    )
    expected = np.array(versions)[serving]
    assert set(pc.unique(served["embedding_version"]).to_pylist()) == set(versions)
    assert (served["embedding_version"].to_numpy(zero_copy_only=False) == expected).all()


def test_each_fm_version_trained_only_on_hours_before_it_served(replayed: tuple[Settings, ReplayReport]) -> None:
    settings, report = replayed
    for entry, start in zip(report.fm_versions, first_serving_hours(report), strict=True):
        tags = replay_registry(settings).get_model_version(FM_MODEL, entry["fm_version"]).tags
        assert datetime.fromisoformat(tags[TRAINED_UNTIL]) <= start, entry


def replay_registry(settings: Settings) -> mlflow.MlflowClient:
    uri = f"sqlite:///{settings.data_dir / 'replay' / 'tiny' / 'seed-0' / 'state' / 'mlflow' / 'mlflow.db'}"
    return mlflow.MlflowClient(uri, registry_uri=uri)


def test_a_refreshed_fm_is_written_in_shadow_first_and_no_hour_loses_ten_points_of_coverage(
    replayed: tuple[Settings, ReplayReport],
) -> None:
    """The new version was trained before its shadow began, promoted by the shadow gate, and served from
    tiers its shadow had filled: all-tier coverage never drops by more than 10 points from one hour to the next."""
    settings, report = replayed
    refreshed = report.fm_versions[1]
    first_serving = first_serving_hours(report)[1]
    client = replay_registry(settings)
    trained_until = datetime.fromisoformat(
        client.get_model_version(FM_MODEL, refreshed["fm_version"]).tags[TRAINED_UNTIL]
    )
    assert trained_until + timedelta(hours=PrecomputeParams.shadow_hours) <= first_serving
    vm = client.get_model_version_by_alias(LEAD.registered_name, CHAMPION)
    assert vm.tags["embedding_version"] == refreshed["embedding_version"] and vm.tags[SHADOW] == "promoted"
    assert "within 10 points below" in vm.tags["promotion"]
    all_tiers = [hour.coverage[FED_BY[-1]] for hour in report.hours]
    assert min(np.diff(all_tiers)) >= -0.10
    at = [datetime.fromisoformat(hour.hour) for hour in report.hours].index(first_serving)
    # Its pair tier as full as the hours before (a cold start halves it: 0.71 -> 0.31 on this world, measured).
    pair = [hour.coverage["pair"] for hour in report.hours]
    assert pair[at] >= np.mean(pair[at - PrecomputeParams.shadow_hours : at]) - 0.10


def test_the_selectors_are_compared_at_equal_fm_budgets(replayed: tuple[Settings, ReplayReport]) -> None:
    settings, report = replayed
    points, third = report.speculation[:6], report.speculation[6]
    assert [p.selector for p in report.speculation] == ["verifier", "budget"] * 3 + ["budget"]
    assert [p.top_fraction for p in points[::2]] == [0.1, 0.2, 0.4]
    served_hours = 6
    for verifier, budget in zip(points[::2], points[1::2], strict=True):
        assert budget.fm_budget == verifier.fm_budget  # the verifier's spend per served hour
        assert budget.fm_calls <= budget.fm_budget * served_hours  # never over budget, re-queue included
        assert 0 <= budget.coverage_pair <= 1 and budget.ne_ci95 is not None
        for arm in (verifier, budget):
            assert arm.hit_rate_ttl is not None and 0 < arm.hit_ceiling_ttl <= 1
        # NE set against the verifier whose spend it got, paired over the same requests
        assert verifier.ne_gain_vs_verifier is None
        assert budget.ne_gain_vs_verifier == pytest.approx(verifier.ne - budget.ne, abs=1e-9)
        low, high = budget.ne_gain_vs_verifier_ci95
        assert low < high < low + (budget.ne_ci95[1] - budget.ne_ci95[0])  # paired: narrower than one arm's own
    # and a third of the default verifier's calls, for "its coverage with at most a third of its calls"
    assert third.fm_budget == points[2].fm_budget // 3 and third.fm_calls <= third.fm_budget * served_hours
    assert third.ne_gain_vs_verifier == pytest.approx(points[2].ne - third.ne, abs=1e-9)
    swept = {p.top_fraction: p for p in report.sweep}
    for verifier in points[::2]:  # the sweep's own arm, run once: its figures, not a second replay's
        assert verifier.coverage_pair == swept[verifier.top_fraction].coverage["pair"]
        assert verifier.ne == swept[verifier.top_fraction].ne
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri)
    run = client.search_runs([client.get_experiment_by_name(EXPERIMENT).experiment_id])[0]
    assert {
        f"speculation_budget_{points[1].fm_budget}_{k}"
        for k in ("coverage_pair", "hit_ceiling_ttl", "ne_gain_vs_verifier")
    } <= set(run.data.metrics)
    html = (settings.data_dir / "replay" / "tiny" / "seed-0" / "report" / "report.html").read_text()
    assert "Selectors at equal FM budgets" in html and "speculation.png" in html


def test_the_capacity_plan_runs_its_grid_each_arm_on_a_fresh_store(replayed: tuple[Settings, ReplayReport]) -> None:
    settings, report = replayed
    budget = [p for p in report.curve if p.selector == "budget"]
    spends = {"top 0.1", "top 0.2", "top 0.4", "top 0.2 / 3"}
    ttls = {PrecomputeParams.ttl_hours, GRID_TTL}
    assert sorted((p.spend, p.ttl_hours) for p in budget) == sorted((s, t) for s in spends for t in ttls)
    assert sorted(p.top_fraction for p in report.curve if p.selector == "verifier") == [0.05, 0.1, 0.2, 0.4]
    full = {p.selector: p for p in report.curve if p.full_budget}
    assert {s: (p.spend, p.ttl_hours, p.min_demand) for s, p in full.items()} == {
        s: ("top 0.4", PrecomputeParams.ttl_hours, 0.0) for s in ("budget", "verifier")
    }
    for p in report.curve:  # paired against its selector's full budget: narrower than the arm's own NE interval
        assert p.ne_loss == pytest.approx(p.ne - full[p.selector].ne, abs=1e-9)
        assert p.ne_loss_ci95[1] - p.ne_loss_ci95[0] <= p.ne_ci95[1] - p.ne_ci95[0]
    # Each arm on a fresh store: its own, holding exactly its warm-up and served hours' runs, at its own budget.
    state = settings.data_dir / "replay" / "tiny" / "seed-0" / "state"
    for p in report.curve:
        name = f"sweep-{p.top_fraction:g}" if p.fm_budget is None else f"budget-{p.fm_budget}"
        name += f"-ttl{p.ttl_hours}" if p.ttl_hours != PrecomputeParams.ttl_hours else ""
        with sqlite3.connect(state / name / "store.db") as db:
            runs = [json.loads(c) for (c,) in db.execute("SELECT counts FROM precompute_runs")]
        assert len(runs) == 4 + 6, name
        assert all(r.get("fm_budget") == p.fm_budget for r in runs), name
    # The seed's own plan in its report and page, and the plan over the seeds beside them and in MLflow.
    assert report.plan["world"] == report.replayed_world == "tiny" and report.plan["verdict"]
    folder = settings.data_dir / "replay" / "tiny"
    html = (folder / "seed-0" / "report" / "report.html").read_text()
    assert "Capacity plan" in html and (folder / "seed-0" / "report" / "plan.png").is_file()
    pooled = json.loads((folder / "plan" / "plan.json").read_text())
    assert pooled["seeds"] == [0] and pooled["commits"] and pooled["verdict"] == report.plan["verdict"]
    client = mlflow.MlflowClient(settings.mlflow_tracking_uri)
    assert client.search_runs([client.get_experiment_by_name("solaris-plan").experiment_id])
