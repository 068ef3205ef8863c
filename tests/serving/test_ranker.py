"""The in-process ranker on SQLite and PostgreSQL: tiers for constructed cases, TTL, versions, inputs."""

from __future__ import annotations

import asyncio
from datetime import timedelta

import numpy as np
import pytest
import torch
from conftest import TTL, Layout, StoreFactory, T, lay_out

from solaris import exposure
from solaris.embedding_version import VersionMismatch, parse_embedding_version
from solaris.enrichment.tiers import absent, served_inputs
from solaris.models.features import TIERS, VM_BASE_COLUMNS
from solaris.serving import Ranker
from solaris.serving.champion import ServingModel
from solaris.store import sqlite as sqlite_store
from solaris.store.records import ExposureCounts


def test_each_candidate_gets_its_tier(layout: Layout, champion: ServingModel) -> None:
    ranker = Ranker(layout.store, champion)
    one = ranker.rank(1, np.array([10, 11]), T)
    two = ranker.rank(2, np.array([20, 30]), T)

    assert one.tier_names() == ["pair", "agg"]
    assert two.tier_names() == ["knn", "none"]
    assert one.embedding_version == layout.version and one.vm_version == champion.pinned.vm
    assert one.store_failure is None and np.all((one.scores > 0) & (one.scores < 1))


def test_inputs_carry_the_written_vectors(layout: Layout, champion: ServingModel) -> None:
    dim, base = champion.code_dim, len(VM_BASE_COLUMNS)
    served = Ranker(layout.store, champion).rank(1, np.array([10, 11]), T)
    pair, agg = served.inputs[:, base : base + dim], served.inputs[:, base + dim + 1 : base + 2 * dim + 1]

    np.testing.assert_array_equal(pair[0], layout.vectors["pair"][0])
    np.testing.assert_array_equal(pair[1], 0)  # no pair row for item 11: zeros, flag 0
    assert served.inputs[0, base + dim] == 1 and served.inputs[1, base + dim] == 0
    np.testing.assert_array_equal(agg, np.repeat(layout.vectors["agg"], 2, axis=0))
    knn_at = base + TIERS.index("knn") * (dim + 1)
    knn = Ranker(layout.store, champion).rank(2, np.array([20]), T).inputs[0, knn_at : knn_at + dim]
    np.testing.assert_array_equal(knn, layout.vectors["neighbour_pair"][0])  # one neighbour: its vector


def test_the_counters_as_stored_feed_every_candidate(layout: Layout, champion: ServingModel) -> None:
    """The VM sees log1p of the stored counts: the user's windows on every row, the pair's on its own item."""
    created = T - timedelta(minutes=30)
    counts = ExposureCounts(np.array([1]), np.array([[2, 5, 9]]), np.array([1]), np.array([11]), np.array([[1, 1, 3]]))
    layout.store.write_exposure_counts("r1", counts, created, created + TTL)
    served = Ranker(layout.store, champion).rank(1, np.array([10, 11]), T)
    other = Ranker(layout.store, champion).rank(2, np.array([11]), T)
    at = slice(len(VM_BASE_COLUMNS) - len(exposure.columns()), len(VM_BASE_COLUMNS))
    np.testing.assert_allclose(served.inputs[:, at], np.log1p([[2, 5, 9, 0, 0, 0], [2, 5, 9, 1, 1, 3]]), rtol=1e-6)
    np.testing.assert_array_equal(other.inputs[:, at], 0.0)  # no counters stored for user 2


def test_scores_are_the_vm_on_those_inputs(layout: Layout, champion: ServingModel) -> None:
    served = Ranker(layout.store, champion).rank(1, np.array([10, 11, 12]), T, positions=np.array([0, 3, 7]))
    expected = champion.vm(torch.from_numpy(served.inputs)).detach().numpy()

    np.testing.assert_allclose(served.scores, expected, rtol=1e-6)
    np.testing.assert_array_equal(served.inputs[:, 3], [0, 3, 7])


def test_an_expired_row_never_feeds_a_score(make_store: StoreFactory, champion: ServingModel) -> None:
    layout = lay_out(make_store(), champion)
    at_expiry = T - timedelta(minutes=30) + TTL
    expired = Ranker(layout.store, champion).rank(1, np.array([10, 11]), at_expiry)
    empty = make_store()
    empty.register_embedding_version(*parse_embedding_version(layout.version), created_at=T)
    nothing = Ranker(empty, champion).rank(1, np.array([10, 11]), at_expiry)  # the same version, no rows

    assert expired.tier_names() == ["none", "none"]
    np.testing.assert_array_equal(expired.scores, nothing.scores)
    just_before = Ranker(layout.store, champion).rank(1, np.array([10]), at_expiry - timedelta(microseconds=1))
    assert just_before.tier_names() == ["pair"]


def test_rows_of_another_embedding_version_are_not_read(make_store: StoreFactory, champion: ServingModel) -> None:
    store = make_store()
    store.register_embedding_version(*parse_embedding_version(champion.pinned.embedding_version), created_at=T)
    other = store.register_embedding_version("999", "998", champion.code_dim, created_at=T)
    ids = np.array([1])
    store.write_pair_embeddings("x", other, ids, np.array([10]), np.ones((1, champion.code_dim)), ids, T, T + TTL)

    assert Ranker(store, champion).rank(1, np.array([10]), T).tier_names() == ["none"]


def test_a_vm_is_never_fed_another_versions_embeddings(champion: ServingModel) -> None:
    n = 2
    with pytest.raises(VersionMismatch, match="expects embedding version"):
        served_inputs(champion.vm, "fm0-ae0-d32", *np.zeros((4, n), int), absent(n, champion.code_dim))


def test_unknown_users_and_items_take_the_cold_path(layout: Layout, champion: ServingModel) -> None:
    served = Ranker(layout.store, champion).rank(9_999_999, np.array([9_999_998, 10]), T)
    assert served.tier_names() == ["none", "none"] and np.isfinite(served.scores).all()


def test_the_awaited_path_serves_what_the_waited_one_does(layout: Layout, champion: ServingModel) -> None:
    for timeout in (None, 0.5):
        ranker = Ranker(layout.store, champion, store_timeout_s=timeout)
        waited = ranker.rank(1, np.array([10, 11, 12]), T, positions=np.array([0, 3, 7]))
        awaited = asyncio.run(ranker.rank_async(1, np.array([10, 11, 12]), T, positions=np.array([0, 3, 7])))
        np.testing.assert_array_equal(awaited.inputs, waited.inputs)
        np.testing.assert_array_equal(awaited.scores, waited.scores)
        assert awaited.tier_names() == waited.tier_names() == ["pair", "agg", "agg"]
        ranker.close()


def test_sqlite_reads_in_thread_and_is_interrupted_past_the_timeout_postgresql_refuses(
    make_store: StoreFactory, champion: ServingModel, monkeypatch: pytest.MonkeyPatch
) -> None:
    """SQLite is read on the serving thread, its time bounded by interrupting the query; a network store
    cannot be interrupted from the reading thread, so it refuses the in-thread timeout (the ranker uses its pool)."""
    layout = lay_out(make_store(), champion)
    if not layout.store.local_reads:
        with pytest.raises(ValueError, match="postgresql reads wait on a network"):
            layout.store.read_tiers_batch(layout.version, np.array([1]), np.array([10]), T, timeout_s=0.05)
        return
    ranker = Ranker(layout.store, champion, store_timeout_s=0.5)
    assert ranker.rank(1, np.array([10]), T).tier_names() == ["pair"]

    clock = iter(range(0, 10**6, 60))  # every look at the clock is a minute later: the deadline passes in-query
    monkeypatch.setattr(sqlite_store.time, "monotonic", lambda: float(next(clock)))
    monkeypatch.setattr(sqlite_store, "PROGRESS_STEPS", 1)  # the test's query is short: check at every step
    late = ranker.rank(1, np.array([10, 11]), T)
    assert late.store_failure == "timeout" and late.tier_names() == ["none", "none"]
    assert ranker.metrics.store_failures.labels("ctr", "timeout")._value.get() == 1
    monkeypatch.undo()
    assert ranker.rank(1, np.array([10]), T).tier_names() == ["pair"]  # the next read is whole again
    awaited = asyncio.run(ranker.rank_async(1, np.array([10]), T))
    assert awaited.store_failure is None and awaited.tier_names() == ["pair"]
