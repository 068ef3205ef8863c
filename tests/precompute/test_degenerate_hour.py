"""An hour in which the FM gives some users and items a zero or NaN vector, and some pair and cohort codes a NaN
or a value float16 cannot hold: the run succeeds, leaves those out of the KNN, A2A, pair and cohort tiers, and
counts them by kind on the run record, in MLflow and on the health page, on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta

import numpy as np
import pytest
from precompute_env import LEAD, store_rows

from solaris.config import Settings
from solaris.models import fm as fm_module
from solaris.monitoring.render import report_html
from solaris.monitoring.report import build_report
from solaris.precompute import embedding
from solaris.precompute.run import run_hour
from solaris.precompute.run_files import DEGENERATE
from solaris.precompute.summary import run_metrics
from solaris.store import StoreError, open_store
from solaris.store.codec import decode_lists
from solaris.store.cohorts import COHORT_USER_BASE
from solaris.store.validate import finite, finite_rows
from solaris.tracking import registry

COHORTS, ITEMS = 3, 12
PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu", "cohorts": COHORTS, "cohort_items": ITEMS}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history


def test_a_row_is_skipped_exactly_where_the_store_would_refuse_it() -> None:
    codes = np.ones((5, 4), np.float32)
    codes[1, 2], codes[2, 0], codes[3, 1] = np.nan, -np.inf, 1e5  # 1e5 is finite in float32, inf in float16
    np.testing.assert_array_equal(finite_rows(codes, "float16"), [True, False, False, False, True])
    np.testing.assert_array_equal(finite_rows(codes, "float32"), [True, False, False, True, True])
    for dtype in ("float16", "float32"):
        keep = finite_rows(codes, dtype)
        finite(codes[keep], "vectors", codes[keep].shape, dtype)  # the kept rows pass the store's own check
        for row in np.flatnonzero(~keep):
            with pytest.raises(StoreError, match="row 0 holds NaN or infinite"):
                finite(codes[[row]], "vectors", (1, 4), dtype)


def _bad_ids(ids: np.ndarray) -> np.ndarray:
    return np.isin(np.asarray(ids) % 10, (0, 1))


def _breaking_vectors(real: Callable, left_out: set[int]) -> Callable:
    """The FM's vectors with ids ending in 0 zeroed and ids ending in 1 holding a NaN."""

    def vectors(model: fm_module.FoundationModel, ids: np.ndarray) -> np.ndarray:
        out = real(model, ids)
        ids = np.asarray(ids)
        out[ids % 10 == 0] = 0.0
        out[ids % 10 == 1, 0] = np.nan
        left_out.update(ids[_bad_ids(ids)].tolist())
        return out

    return vectors


def test_degenerate_vectors_and_codes_are_left_out_and_counted(
    run_settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> None:
    bad_users: set[int] = set()
    bad_items: set[int] = set()
    skipped = {"pair": 0, "cohort": 0}
    broken_prototype: list[int] = []
    real_codes = embedding.embed_codes

    def codes(*args: object, new_users: bool = False) -> np.ndarray:
        out = real_codes(*args, new_users=new_users)
        users, items = np.asarray(args[3]), np.asarray(args[4])
        if new_users:  # the first cohort's member: every code NaN, so that cohort gets nothing this hour
            bad = (users == users[0]) | (items % 5 == 0)
            out[bad, 1] = np.nan
            broken_prototype.append(int(users[0]))
        else:
            bad = (users * 31 + items) % 7 == 0
            out[bad & (items % 2 == 0), 0] = np.inf
            out[bad & (items % 2 == 1), 0] = 1e6  # finite as computed, beyond float16 as stored
        skipped["cohort" if new_users else "pair"] += int(bad.sum())
        return out

    monkeypatch.setattr(fm_module, "user_vectors", _breaking_vectors(fm_module.user_vectors, bad_users))
    monkeypatch.setattr(fm_module, "item_vectors", _breaking_vectors(fm_module.item_vectors, bad_items))
    monkeypatch.setattr(embedding, "embed_codes", codes)

    done = run_hour(run_settings, HOUR, PARAMS, clock=lambda: HOUR)

    counts = done["counts"]
    expected = {"user": len(bad_users), "item": len(bad_items)} | skipped
    assert all(expected.values()), expected
    assert {kind: counts[DEGENERATE[kind]] for kind in expected} == expected
    assert counts["pairs_written"] == counts["selected"] - skipped["pair"] > 0
    assert counts["cohort_codes_written"] == COHORTS * ITEMS - skipped["cohort"] > 0
    registry.connect(run_settings)
    with open_store(run_settings.store_url) as store:
        record = store.get_run(done["run_key"])
        assert record is not None and record.status == "succeeded"
        assert {k: record.counts[k] for k in DEGENERATE.values()} == {DEGENERATE[k]: n for k, n in expected.items()}
        user_links = store_rows(store, "SELECT user_id, neighbour_id FROM user_neighbours")
        item_lists = store_rows(store, "SELECT item_id, neighbours FROM item_neighbours")
        pairs = store_rows(store, "SELECT user_id, item_id FROM pair_embeddings")
        key = done["run_key"]
        page = report_html(build_report(store, registry.connect(run_settings), HOUR, vms=[LEAD.name]))

    # The user KNN: a degenerate user has no row and is nobody's neighbour, though some of them hold pair codes.
    assert bad_users & {u for u, _ in pairs if u < COHORT_USER_BASE}, "a degenerate user would have been pooled"
    assert not bad_users & {u for u, _ in user_links} and not bad_users & {n for _, n in user_links}
    assert {u for u, _ in user_links}, "the other users still have neighbours"
    # The A2A lists: a degenerate item lists nothing and is on no list.
    slots = [len(b) // 8 for _, b in item_lists]
    listed, _ = decode_lists(b"".join(bytes(b) for _, b in item_lists), slots)
    owner = np.repeat([i for i, _ in item_lists], slots)
    links = {(int(i), int(j)) for i, j in zip(owner, listed, strict=True) if j >= 0}
    assert links and not bad_items & ({i for i, _ in links} | {j for _, j in links})
    # The cohort whose every code was NaN has no row; the others do.
    prototypes = {u for u, _ in pairs if u >= COHORT_USER_BASE}
    assert len(prototypes) == COHORTS - 1 and broken_prototype
    # MLflow and the health page carry the counts.
    metrics = run_metrics(run_settings, [key])[key]
    assert {kind: metrics[f"count_{DEGENERATE[kind]}"] for kind in expected} == expected
    for kind, n in expected.items():
        assert f'data-count="{DEGENERATE[kind]}"' in page and f"{DEGENERATE[kind]} {n}</span>" in page
