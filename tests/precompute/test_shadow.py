"""The shadow precompute: a challenger chain with a new embedding version is written beside the champion's,
every tier, until the shadow gate promotes it (coverage within 10 points) or refuses it (more than 10 below)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
from precompute_env import LEAD, copy_chain, store_rows
from store_state import store_checksum
from test_hourly_run import FIRST_HOUR, PARAMS, fixed_clock

from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute.run import run_hour
from solaris.store import open_store
from solaris.tracking import registry
from solaris.tracking.promotion import await_shadow, end_shadow
from solaris.tracking.registry import CHALLENGER, CHAMPION, SHADOW, PinnedVersions
from solaris.training.jobs import TrainReport, World

TIER_TABLES = ("pair_embeddings", "user_aggregates", "user_neighbours", "item_neighbours")
SHADOW_STEPS = (
    "shadow_embed_shard",
    "shadow_write_pairs",
    "shadow_aggregates",
    "shadow_user_vectors",
    "shadow_neighbours",
)


@pytest.fixture
def chains(
    run_settings: Settings, trained: tuple[Settings, World, TrainReport]
) -> Iterator[tuple[MlflowClient, PinnedVersions, PinnedVersions]]:
    """(client, champion, challenger): a copy of the session's chain, registered but not yet written in
    shadow; every alias the test moves is put back."""
    client = registry.connect(run_settings)
    champion = registry.resolve_champions(client, LEAD.name)
    previous_version = registry.version_by_alias(client, LEAD.registered_name, CHALLENGER).version
    previous = registry.pinned_from_vm(client, LEAD.name, str(previous_version))
    challenger = copy_chain(client, run_settings, trained[1], trained[2])
    try:
        yield client, champion, challenger
    finally:
        registry.set_chain_alias(client, champion, CHAMPION)
        registry.set_chain_alias(client, previous, CHALLENGER)
        end_shadow(client, [LEAD.registered_name])


def versions_written(settings: Settings, table: str) -> dict[str, int]:
    with open_store(settings.store_url) as store:
        return dict(store_rows(store, f"SELECT version_id, COUNT(*) FROM {table} GROUP BY version_id"))


def test_a_challenger_is_written_in_shadow_every_tier_then_promoted_by_its_coverage(
    run_settings: Settings, chains: tuple[MlflowClient, PinnedVersions, PinnedVersions]
) -> None:
    client, champion, challenger = chains
    await_shadow(client, [challenger])
    start = EventLog(run_settings.world_dir()).start + FIRST_HOUR
    params = PARAMS | {"shadow_hours": 2}

    first = run_hour(run_settings, start, params, clock=fixed_clock)

    counts = first["counts"]
    assert counts["shadow_pairs_written"] == counts["pairs_written"] > 0  # the champion's selection, embedded again
    assert counts["shadow_embedded"] == counts["embedded"]
    assert counts["shadow_hours_written"] == 1 and "shadow_promoted" not in counts
    assert all(first["timings"][step] > 0 for step in SHADOW_STEPS)  # the shadow's cost, on the run record
    for table in TIER_TABLES:
        written = versions_written(run_settings, table)
        assert set(written) == {champion.embedding_version, challenger.embedding_version}, table
    pairs = versions_written(run_settings, "pair_embeddings")
    assert pairs[champion.embedding_version] == pairs[challenger.embedding_version]
    assert registry.resolve_champions(client, LEAD.name) == champion  # still written in shadow only
    before = store_checksum(run_settings.store_url)
    again = run_hour(run_settings, start, params, clock=fixed_clock)
    assert store_checksum(run_settings.store_url) == before and again["counts"] == counts  # a rerun, shadow included

    second = run_hour(run_settings, start + timedelta(hours=1), params, clock=fixed_clock)

    figures = second["quality"]
    assert figures["coverage_any"] > 0.5 and figures["shadow_coverage_any"] >= figures["coverage_any"] - 0.10
    assert second["counts"]["shadow_promoted"] == 1
    assert registry.resolve_champions(client, LEAD.name) == challenger
    tags = client.get_model_version(LEAD.registered_name, challenger.vm).tags
    assert tags[SHADOW] == "promoted" and "within 10 points below" in tags["promotion"]

    third = run_hour(run_settings, start + timedelta(hours=2), params, clock=fixed_clock)

    assert not [key for key in third["counts"] if key.startswith("shadow_")]  # the new champion, alone
    assert third["quality"]["coverage_any"] > 0.5  # served from the tiers its shadow filled
    with open_store(run_settings.store_url) as store:
        record = store.get_run(third["run_key"])
    assert record is not None and record.vm_version == challenger.vm


def test_a_shadow_whose_coverage_is_too_low_is_refused_with_that_reason(
    run_settings: Settings, chains: tuple[MlflowClient, PinnedVersions, PinnedVersions]
) -> None:
    """The champion has served an hour; a shadow judged after its first hour covers nothing of it."""
    client, champion, challenger = chains
    start = EventLog(run_settings.world_dir()).start + FIRST_HOUR
    params = PARAMS | {"shadow_hours": 1}
    run_hour(run_settings, start, params, clock=fixed_clock)
    await_shadow(client, [challenger])

    judged = run_hour(run_settings, start + timedelta(hours=1), params, clock=fixed_clock)

    assert judged["quality"]["shadow_coverage_any"] == 0 and judged["quality"]["coverage_any"] > 0.10
    assert judged["counts"]["shadow_promoted"] == 0
    assert registry.resolve_champions(client, LEAD.name) == champion
    tags = client.get_model_version(LEAD.registered_name, challenger.vm).tags
    assert tags[SHADOW] == "refused" and "more than 10 points below" in tags["promotion"]
    after = run_hour(run_settings, start + timedelta(hours=2), params, clock=fixed_clock)
    assert "shadow_pairs_written" not in after["counts"]  # refused: no longer written in shadow
