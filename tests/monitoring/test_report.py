"""The health report against a real SQLite store and a real (local) MLflow store with known contents."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from health_world import HOUR, PAIR_BATCHES, VMS, HealthWorld, T, closed_port, register_champion, run_key
from precompute_env import LEAD, precompute_settings

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.monitoring.report import MLFLOW, STORE, HealthReport, build_report
from solaris.monitoring.status import health_status
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.run import run_hour
from solaris.precompute.run_files import FM_BUDGET_COUNT
from solaris.precompute.summary import COVERAGE, run_metrics
from solaris.store import open_store
from solaris.tracking import registry
from solaris.training.jobs import TrainReport, World


def _report(world: HealthWorld, **kwargs: int) -> HealthReport:
    with open_store(world.settings.store_url) as store:
        return build_report(store, registry.connect(world.settings), T, vms=VMS, **kwargs)


def test_table_figures_match_what_was_written(health_world: HealthWorld) -> None:
    report = _report(health_world)

    assert not report.problems
    pairs = {v.version: v.tables["pair_embeddings"] for v in report.versions}[health_world.champion_version]
    fresh = [b for b in PAIR_BATCHES if b.expires_at > T]
    assert pairs.rows == sum(b.n for b in PAIR_BATCHES)
    assert pairs.fresh == sum(b.n for b in fresh) and pairs.fresh_share == pairs.fresh / pairs.rows
    assert pairs.expiring_within_hour == sum(b.n for b in fresh if b.expires_at <= T + HOUR) == 3
    assert pairs.oldest_created_at == min(b.created_at for b in PAIR_BATCHES)
    assert pairs.newest_created_at == max(b.created_at for b in PAIR_BATCHES)
    aggregates = report.versions[0].tables["user_aggregates"]
    assert (aggregates.rows, aggregates.fresh, aggregates.expiring_within_hour) == (3, 3, 3)


def test_a_later_time_sees_the_same_rows_less_fresh(health_world: HealthWorld) -> None:
    with open_store(health_world.settings.store_url) as store:
        later = build_report(store, registry.connect(health_world.settings), T + HOUR, vms=VMS)

    pairs = later.versions[0].tables["pair_embeddings"]
    assert pairs.rows == sum(b.n for b in PAIR_BATCHES)
    assert pairs.fresh == sum(b.n for b in PAIR_BATCHES if b.expires_at > T + HOUR) == 6


def test_runs_newest_first_with_their_latest_mlflow_figures(health_world: HealthWorld) -> None:
    report = _report(health_world)

    assert [r.record.run_id for r in report.runs] == health_world.run_keys_newest_first
    by_key = {r.record.run_id: r for r in report.runs}
    for key, figures in health_world.figures.items():
        assert by_key[key].figures == figures  # the later of two logged runs; served_pairs is not a figure
    assert by_key[run_key(11)].record.status == "failed" and by_key[run_key(11)].figures == {}
    assert by_key[run_key(10)].record.counts == {"pairs_written": 100, "selected": 200}


def test_versions_of_the_runs_without_a_champion(health_world: HealthWorld) -> None:
    report = _report(health_world)

    assert report.champion is None and "no @champion" in report.champion_note
    assert [v.version for v in report.versions] == [health_world.champion_version, health_world.older_version]
    assert not any(v.champion for v in report.versions)
    assert report.versions[1].tables["pair_embeddings"].fresh == 0


def test_champion_versions_from_mlflow(health_world: HealthWorld) -> None:
    emb = register_champion(registry.connect(health_world.settings))

    report = _report(health_world)

    assert emb == health_world.champion_version
    assert (report.champion.fm, report.champion.ae, report.champion.vm) == ("1", "1", "1")
    assert report.versions[0].version == emb and report.versions[0].champion
    assert report.champion_note is None


def test_coverage_by_hour_is_the_hour_before_each_run(health_world: HealthWorld) -> None:
    day = _report(health_world).coverage
    assert [p.hour for p in day] == [T.replace(hour=8), T.replace(hour=9)]
    assert day[0].shares == {
        tier: health_world.figures[run_key(9)][f"coverage_{tier}"]
        for tier in ("pair", "a2a", "agg", "knn", "cohort", "any")
    }

    last_three = _report(health_world, hours=3).coverage
    assert [p.hour for p in last_three] == [T.replace(hour=9)]


def test_an_unreachable_store_is_a_problem_not_an_error(health_world: HealthWorld) -> None:
    register_champion(registry.connect(health_world.settings))
    with open_store("postgresql+psycopg://postgres@127.0.0.1:9/none") as store:
        report = build_report(store, registry.connect(health_world.settings), T, vms=VMS)

    assert {p.source for p in report.problems} == {STORE}
    assert "OperationalError" in report.problems[0].message
    assert report.champion is not None and report.runs == [] and report.versions == []


def test_a_store_without_tables_is_a_problem_naming_the_command(health_world: HealthWorld, tmp_path: Path) -> None:
    with open_store(f"sqlite:///{tmp_path / 'never-initialised.db'}") as store:
        report = build_report(store, registry.connect(health_world.settings), T, vms=VMS)

    assert [(p.source, p.message) for p in report.problems] == [
        (STORE, "the feature store has no tables yet: `solaris store init` creates them (so does the first precompute)")
    ]
    assert report.runs == [] and report.versions == []


def test_without_mlflow_the_store_figures_remain(health_world: HealthWorld) -> None:
    with open_store(health_world.settings.store_url) as store:
        report = build_report(store, None, T, vms=VMS)

    assert report.champion is None and report.champion_note is None
    assert [r.figures for r in report.runs] == [{}, {}, {}] and report.coverage == []
    assert report.versions[0].tables["pair_embeddings"].rows == sum(b.n for b in PAIR_BATCHES)
    assert not report.problems  # the caller, who decided MLflow is down, says so


def test_a_failing_mlflow_read_is_a_problem(health_world: HealthWorld, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("MLFLOW_HTTP_REQUEST_MAX_RETRIES", "0")  # else the client retries for minutes
    with open_store(health_world.settings.store_url) as store:
        report = build_report(store, MlflowClient(f"http://127.0.0.1:{closed_port()}"), T, vms=VMS)

    assert report.problems and {p.source for p in report.problems} == {MLFLOW}
    assert "MlflowException" in report.problems[0].message
    assert len(report.runs) == 3 and report.versions[0].tables["pair_embeddings"].rows == 14


@pytest.mark.parametrize("kwargs", [{"n_runs": 0}, {"hours": -1}])
def test_bad_bounds_name_the_problem(health_world: HealthWorld, kwargs: dict[str, int]) -> None:
    with pytest.raises(ValueError, match="must be at least 1"):
        _report(health_world, **kwargs)


def test_coverage_window_ends_before_t(health_world: HealthWorld) -> None:
    with open_store(health_world.settings.store_url) as store:
        report = build_report(store, registry.connect(health_world.settings), T.replace(hour=9), vms=VMS, hours=2)

    assert [p.hour for p in report.coverage] == [T.replace(hour=8)]  # 09:00 itself is not before t


@pytest.mark.slow
def test_report_of_real_precompute_runs(trained: tuple[Settings, World, TrainReport], tmp_path: Path) -> None:
    """Two hours of the real precompute on the session's trained models: the report reads what it wrote."""
    settings = precompute_settings(trained[0], tmp_path)
    first = EventLog(settings.world_dir()).start + timedelta(hours=30)
    results = [run_hour(settings, first + i * HOUR, {"shards": 1, "device": "cpu"}) for i in range(2)]
    t = first + 2 * HOUR

    with open_store(settings.store_url) as store:
        report = build_report(store, registry.connect(settings), t, vms=VMS)
        stats = store.stats(report.champion.embedding_version, t)

    pinned = registry.resolve_champions(registry.connect(settings), LEAD.name)
    assert report.champion == pinned and not report.problems
    assert report.versions[0].version == pinned.embedding_version and report.versions[0].tables == stats
    keys = [r["run_key"] for r in reversed(results)]
    assert [r.record.run_id for r in report.runs][:2] == keys
    logged = run_metrics(settings, keys)
    for run in report.runs[:2]:  # the store's figures, overlaid with MLflow's: the same values
        assert {name: run.figures[name] for name in COVERAGE} == {n: logged[run.record.run_id][n] for n in COVERAGE}
    assert [p.hour for p in report.coverage] == [first - HOUR, first]
    readings = {r.check: r for r in health_status(report).readings}
    newest = report.runs[0].record.counts  # the run records the budget its selector spent against
    assert newest[FM_BUDGET_COUNT] == PrecomputeParams().fm_budget >= newest["selected"] > 0
    assert readings["fm_calls_vs_budget"].value == newest["selected"] / newest[FM_BUDGET_COUNT]
    assert readings["run_age"].value == 0.0 and readings["run_age"].level == "healthy"  # its hour ended at t
