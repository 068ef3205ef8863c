"""The budget selector through a whole run: the demand model pinned, the budget held, the rerun unchanged."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from precompute_env import precompute_settings
from store_state import store_checksum

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute import nodes, run_files
from solaris.precompute.run import run_hour
from solaris.precompute.spec import HourRun
from solaris.store import open_store
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION, DEMAND_MODEL
from solaris.training.jobs import TrainReport, World

BUDGET = 400
PARAMS = {"shards": 2, "batch_size": 2048, "device": "cpu", "selector": "budget", "fm_budget": BUDGET}


def fixed_clock() -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC)


@pytest.fixture
def settings(trained: tuple[Settings, World, TrainReport], tmp_path: Path) -> Settings:
    return precompute_settings(trained[0], tmp_path)


def test_budget_holds_with_the_requeue_and_the_demand_model_is_pinned(settings: Settings) -> None:
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    first = run_hour(settings, start, PARAMS, clock=fixed_clock)
    second = run_hour(settings, start + timedelta(hours=1), PARAMS, clock=fixed_clock)
    for result in (first, second):
        assert 0 < result["counts"]["selected"] <= BUDGET and result["counts"]["forced"] == 0
        assert result["counts"]["pairs_written"] <= BUDGET
    assert second["counts"]["requeued"] > 0  # misses were there to compete for the budget
    champion = MlflowClient().get_model_version_by_alias(DEMAND_MODEL, CHAMPION).version
    resolved = nodes.resolve(settings, start, PARAMS, fixed_clock())
    assert nodes.hour_run(resolved).demand_version == str(champion)
    verifier = nodes.resolve(settings, start, PARAMS | {"selector": "verifier"}, fixed_clock())
    assert nodes.hour_run(verifier).demand_version is None


def test_a_rerun_of_a_budget_hour_writes_the_same_pairs(settings: Settings) -> None:
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    run_hour(settings, start, PARAMS, clock=fixed_clock)
    run_hour(settings, start + timedelta(hours=1), PARAMS, clock=fixed_clock)
    before = store_checksum(settings.store_url)
    run_hour(settings, start + timedelta(hours=1), PARAMS, clock=fixed_clock)
    after = store_checksum(settings.store_url)
    for table in ("pair_embeddings", "user_aggregates", "user_neighbours"):
        assert after[table] == before[table], table


def selection(settings: Settings, at: datetime, params: dict[str, object]) -> pd.DataFrame:
    """The pairs the hour's ``select`` step stages for the FM (the run is left unfinished, so they stay)."""
    from solaris.precompute.pipeline import SELECTED

    run = nodes.hour_run(nodes.resolve(settings, at, params, fixed_clock()))
    select_through(settings, run)
    return run_files.step_staging(settings, run, "embed_shard").read(SELECTED).to_pandas()


def select_through(settings: Settings, run: HourRun) -> None:
    """The run's steps up to ``select``, each shard in turn, as the in-process runner calls them."""
    from solaris.precompute.pipeline import PRECOMPUTE
    from solaris.precompute.run import call_node

    for name in ("count_requests", "candidates", "score", "cut", "select"):
        step = PRECOMPUTE.step(name)
        shards = range(run_files.shard_count(run, step.mapped_over)) if step.mapped_over else [None]
        for shard in shards:
            call_node(run, settings, name, shard)


def test_min_demand_spends_no_call_on_unlikely_pairs(settings: Settings) -> None:
    """The floor takes the pairs below it out before the budget cut: what stays is the unfloored choice's
    pairs above the floor, plus pairs the freed budget now reaches, all above it; the budget is a cap."""
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    run_hour(settings, start, PARAMS, clock=fixed_clock)  # a store with fresh pairs and misses to re-queue
    at = start + timedelta(hours=1)
    unfloored = selection(settings, at, PARAMS)
    floor = float(unfloored["demand"].median())
    floored = selection(settings, at, PARAMS | {"min_demand": floor})
    assert (floored["demand"] >= floor).all() and len(floored) <= BUDGET
    above = unfloored[unfloored["demand"] >= floor]
    assert 0 < len(above) < len(unfloored) == BUDGET
    assert above.merge(floored, on=["user_id", "item_id"]).shape[0] == len(above)


def test_a_floor_no_pair_reaches_writes_nothing_and_the_run_succeeds(settings: Settings) -> None:
    """A quiet hour may embed no pair at all; the run's other tiers (aggregates, neighbours, cohorts) still run."""
    at = EventLog(settings.world_dir()).start + timedelta(hours=30)
    result = run_hour(settings, at, PARAMS | {"min_demand": 1.0}, clock=fixed_clock)
    assert result["counts"]["selected"] == 0 and result["counts"]["pairs_written"] == 0
    assert result["counts"]["cohort_codes_written"] > 0
    with open_store(settings.store_url) as store:
        record = store.get_run(result["run_key"])
        assert record is not None and record.status == "succeeded"


def test_a_demand_model_for_another_ttl_is_refused(settings: Settings) -> None:
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    with pytest.raises(ValueError, match="predicts requests within 4 h, but this run's ttl_hours is 6"):
        run_hour(settings, start, PARAMS | {"ttl_hours": 6}, clock=fixed_clock)
    assert registry.version_by_alias(MlflowClient(), DEMAND_MODEL, CHAMPION) is not None
    assert np.isfinite(float(MlflowClient().get_model_version_by_alias(DEMAND_MODEL, CHAMPION).tags["valid_auc"]))


def test_the_verifier_selects_the_vms_top_fraction_as_before(settings: Settings) -> None:
    """``selector=verifier`` is the paper's arm, kept reproducible: the VM scores every pool pair at position 0
    with the exposure counters as of the hour and every tier absent, and the top fraction (re-queue forced,
    per-user cap) is what the run stages."""
    from solaris.models.features import VM_BASE_COLUMNS, HistoryIndex
    from solaris.models.vm import score
    from solaris.precompute.embedding import HISTORY_COLUMNS
    from solaris.precompute.pipeline import POOL, SELECTED
    from solaris.precompute.verifier import select_top_fraction

    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    params = PARAMS | {"selector": "verifier", "top_fraction": 0.3}
    run_hour(settings, start, params, clock=fixed_clock)  # a store with fresh pairs and misses to re-queue
    run = nodes.hour_run(nodes.resolve(settings, start + timedelta(hours=1), params, fixed_clock()))
    select_through(settings, run)
    pool = run_files.step_staging(settings, run, "score").read(POOL).to_pandas()
    vm = registry.load_vm(run.vm_name, run.vm_version)
    users, items = pool["user_id"].to_numpy(np.int64), pool["item_id"].to_numpy(np.int64)
    rows = np.zeros((len(users), len(vm.config.columns())), np.float32)  # every tier's code and flag 0: absent
    rows[:, :4] = np.column_stack([users, items, np.full(len(users), run.interval_start.hour), np.zeros(len(users))])
    log = EventLog(settings.world_dir())
    whole = HistoryIndex.from_table(log.impressions(log.start, log.end, HISTORY_COLUMNS))
    at = np.full(len(users), int(run.interval_start.timestamp() * 1_000_000))
    rows[:, 4 : len(VM_BASE_COLUMNS)] = np.log1p(whole.exposure_raw(users, items, at))
    assert rows[:, 4 : len(VM_BASE_COLUMNS)].any()
    expected = select_top_fraction(pool.assign(score=score(vm, rows)), 0.3, run.params.per_user_cap)
    staged = run_files.step_staging(settings, run, "embed_shard").read(SELECTED).to_pandas()
    assert expected["forced"].any() and len(expected) < len(pool)
    np.testing.assert_array_equal(
        staged[["user_id", "item_id"]].to_numpy(), expected[["user_id", "item_id"]].to_numpy()
    )
    np.testing.assert_allclose(staged["score"], expected["score"], rtol=1e-6)


def test_under_its_demand_floor_the_run_takes_the_verifier_and_its_record_says_why(settings: Settings) -> None:
    start = EventLog(settings.world_dir()).start + timedelta(hours=30)
    auc = registry.resolve_demand(MlflowClient()).valid_auc
    assert auc is not None and 0.5 < auc < 1
    weak = nodes.hour_run(nodes.resolve(settings, start, PARAMS | {"demand_auc_floor": auc + 1e-3}, fixed_clock()))
    assert (weak.params.selector, weak.demand_version) == ("verifier", None)
    with open_store(settings.store_url) as store:
        record = store.get_run(weak.run_key)
    assert record is not None and record.selector == "verifier"
    assert f"validation AUC {auc:.3f} is under demand_auc_floor" in str(record.selector_reason)
    # At its floor the budget selector runs, and the retried record says so.
    strong = nodes.hour_run(nodes.resolve(settings, start, PARAMS | {"demand_auc_floor": auc}, fixed_clock()))
    assert strong.params.selector == "budget" and strong.demand_version is not None
    with open_store(settings.store_url) as store:
        record = store.get_run(strong.run_key)
    assert record is not None and record.selector == "budget" and "asked for" in str(record.selector_reason)
