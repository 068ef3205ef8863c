"""The hourly precompute run end to end without Airflow (``run_hour``), on the session's tiny-world models."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from precompute_env import LEAD, copy_chain, precompute_settings
from store_state import store_checksum

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute import nodes, run_files
from solaris.precompute.candidates import RequestStats
from solaris.precompute.pipeline import REQUEST_STATS
from solaris.precompute.run import call_node, run_hour, run_resolved
from solaris.store import open_store
from solaris.tracking import registry
from solaris.tracking.registry import CHAMPION
from solaris.training.jobs import TrainReport, World

PARAMS = {"shards": 2, "batch_size": 2048, "device": "cpu"}
FIRST_HOUR = timedelta(hours=30)  # the tiny world has 72 hours; a day of history before the first run


def fixed_clock() -> datetime:
    return datetime(2030, 1, 1, tzinfo=UTC)


def test_rerunning_an_hour_leaves_the_store_identical(run_settings: Settings) -> None:
    start = EventLog(run_settings.world_dir()).start + FIRST_HOUR
    run_hour(run_settings, start, PARAMS, clock=fixed_clock)
    second = run_hour(run_settings, start + timedelta(hours=1), PARAMS, clock=fixed_clock)
    before = store_checksum(run_settings.store_url)

    again = run_hour(run_settings, start + timedelta(hours=1), PARAMS, clock=fixed_clock)

    after = store_checksum(run_settings.store_url)
    assert _rows_alone(after) == _rows_alone(before)
    # The run record alike, but for what the expire step deleted: rows that expired by the hour's start (a pair
    # code may live one hour on its phase), which the first attempt deleted and the rerun finds gone.
    assert second["counts"]["expired_pair_embeddings"] > 0 and again["counts"]["expired_pair_embeddings"] == 0
    assert _kept(again["counts"]) == _kept(second["counts"])
    assert again["quality"] == second["quality"]  # measured once, before the first attempt wrote
    # The rerun faced real decisions: pairs kept fresh by the first hour, and misses to re-queue.
    assert second["counts"]["still_fresh"] > 0 and second["counts"]["requeued"] > 0
    assert before["pair_embeddings"][0] > second["counts"]["pairs_written"] > 0


def _rows_alone(checksum: dict[str, tuple[int, str]]) -> dict[str, tuple[int, str]]:
    return {table: found for table, found in checksum.items() if table != "precompute_runs"}


def _kept(counts: dict[str, int]) -> dict[str, int]:
    return {name: n for name, n in counts.items() if name != "expired_pair_embeddings"}


def test_the_run_record_and_mlflow_carry_the_efficiency_figures(run_settings: Settings) -> None:
    """With a 1 h TTL the second run judges the first's pairs, whose freshness just ended: hit while fresh
    is then the same-hour hit rate, and the selector's AUC is measured on the first run's scored pool."""
    from solaris.precompute.summary import run_metrics

    params = PARAMS | {"ttl_hours": 1, "selector": "verifier"}  # the session's demand model predicts 4 h
    start = EventLog(run_settings.world_dir()).start + FIRST_HOUR
    first = run_hour(run_settings, start, params, clock=fixed_clock)
    done = run_hour(run_settings, start + timedelta(hours=1), params, clock=fixed_clock)

    figures = done["quality"]
    assert figures["ttl_pairs"] == figures["previous_pairs"] == first["counts"]["pairs_written"] > 0
    assert figures["hit_rate_ttl"] == figures["hit_rate"] and 0 < figures["ttl_hits"] < figures["ttl_pairs"]
    assert figures["scored_pairs"] == first["counts"]["pool"] - first["counts"]["still_fresh"]
    assert 0 < figures["requested_auc"] < 1  # both labels present (its value is measured, not asserted)
    # The hit rate's ceiling: the first run's pool, requested while fresh, over what it wrote.
    assert figures["hit_ceiling_ttl"] == min(1.0, figures["scored_requested"] / figures["ttl_pairs"])
    assert figures["hit_rate_ttl"] <= figures["hit_ceiling_ttl"]
    covered = figures["covered_pair_candidates"]
    assert 0 < covered <= figures["served_pairs"] * figures["coverage_pair"] + 0.5
    assert figures["fm_calls_per_covered_candidate"] == pytest.approx(figures["previous_pairs"] / covered)
    assert figures["covered_candidates_per_fm_call"] == pytest.approx(covered / figures["previous_pairs"])
    with open_store(run_settings.store_url) as store:
        record = store.get_run(done["run_key"])
    assert record is not None and record.figures == figures
    logged = run_metrics(run_settings, [done["run_key"]])[done["run_key"]]
    assert {k: logged[k] for k in figures} == figures
    assert done["counts"]["expired_score_log_hours"] == 0


def test_one_table_serves_every_vm_the_same_rows_a_one_vm_run_writes(
    trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    """ctr and cvr configured (the default) or ctr alone: the same selection, embedded and written once."""
    one_vm = tmp_path / "one_vm.toml"
    one_vm.write_text('[vm.ctr]\nlabel = "click"\n')
    both = precompute_settings(trained[0], tmp_path / "both")
    alone = precompute_settings(trained[0], tmp_path / "alone").with_overrides(vms_file=one_vm)
    assert [s.name for s in both.vms()] == ["ctr", "cvr"] and [s.name for s in alone.vms()] == ["ctr"]
    start = EventLog(both.world_dir()).start + FIRST_HOUR

    results = [run_hour(settings, start, PARAMS, clock=fixed_clock) for settings in (both, alone)]

    assert results[0]["counts"] == results[1]["counts"] and results[0]["counts"]["pairs_written"] > 0
    assert store_checksum(both.store_url) == store_checksum(alone.store_url)


def test_promoting_a_new_chain_mid_run_leaves_the_run_on_its_pinned_versions(
    trained: tuple[Settings, World, TrainReport], tmp_path: Path
) -> None:
    _, world, report = trained
    settings = precompute_settings(trained[0], tmp_path)
    client = registry.connect(settings)
    pinned = registry.resolve_champions(client, LEAD.name)
    resolved = nodes.resolve(settings, world.log.start + FIRST_HOUR, PARAMS, fixed_clock())
    new_chain = copy_chain(client, settings, world, report)
    registry.set_chain_alias(client, new_chain, CHAMPION)
    try:
        assert registry.resolve_champions(client, LEAD.name) == new_chain != pinned
        done = run_resolved(settings, resolved, clock=fixed_clock)
    finally:
        registry.set_chain_alias(client, pinned, CHAMPION)

    run = nodes.hour_run(resolved)
    assert (run.fm_version, run.ae_version, run.vm_version) == (pinned.fm, pinned.ae, pinned.vm)
    with open_store(settings.store_url) as store:
        record = store.get_run(run.run_key)
        with store.engine.connect() as conn:
            written = {
                table: {r[0] for r in conn.exec_driver_sql(f"SELECT DISTINCT version_id FROM {table}")}
                for table in ("pair_embeddings", "user_aggregates", "user_neighbours")
            }
    assert record is not None and record.status == "succeeded"
    assert (record.fm_version, record.ae_version, record.vm_version) == (pinned.fm, pinned.ae, pinned.vm)
    assert written == dict.fromkeys(written, {pinned.embedding_version})
    assert done["counts"]["pairs_written"] > 0


def test_an_hour_with_no_events_before_it_is_skipped_and_says_why(run_settings: Settings) -> None:
    """Two days after the log ends the candidates' lookback is empty: nothing to precompute, and no success."""
    hour = EventLog(run_settings.world_dir()).end.replace(minute=0) + timedelta(hours=48)

    done = run_hour(run_settings, hour, PARAMS, clock=fixed_clock)

    assert "no requests in the 24 h before" in done["skipped"] and done["counts"] == {}
    with open_store(run_settings.store_url) as store:
        record = store.get_run(done["run_key"])
    assert record is not None and record.status == "skipped" and record.counts == {}
    assert store_checksum(run_settings.store_url)["pair_embeddings"][0] == 0


@pytest.mark.parametrize("likely_users", [3, 5])
def test_likely_users_bounds_the_users_given_speculative_candidates(run_settings: Settings, likely_users: int) -> None:
    start = EventLog(run_settings.world_dir()).start + FIRST_HOUR
    run = nodes.hour_run(nodes.resolve(run_settings, start, PARAMS | {"likely_users": likely_users}, fixed_clock()))
    call_node(run, run_settings, "count_requests", None)
    stats = RequestStats.from_table(run_files.step_staging(run_settings, run, "candidates").read(REQUEST_STATS))
    assert len(stats.likely_users) == likely_users
