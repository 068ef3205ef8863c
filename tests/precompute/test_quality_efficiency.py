"""The honest efficiency figures (issue #15): a hit is a pair requested as a candidate while it is fresh; the
selector's AUC ranks its whole scored pool by that label; the score log keeps that pool per hour."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pandas as pd
import pytest
from precompute_logs import T0, LogFactory

from solaris.config import Settings
from solaris.data.hourly import available_hours
from solaris.precompute import nodes, quality, run_files
from solaris.precompute.codelog import CodeLog
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.scorelog import ScoreLog
from solaris.precompute.spec import HourRun, run_key
from solaris.store import open_store

H = timedelta(hours=1)
TTL = 4
W = T0 + 5 * H  # the hour the judged run wrote; its pairs are fresh over [W, W + TTL)
END = W + TTL * H  # the run that measures them starts here
DIM = 2


def _codes(tmp_path: Path, pairs: list[tuple[int, int]]) -> CodeLog:
    log = CodeLog(tmp_path / "precompute" / "codes", "fm1-ae1-d2", DIM)
    users, items = (np.array(x, np.int64) for x in zip(*pairs, strict=True))
    n = len(pairs)
    expires = np.full(n, np.datetime64("NaT"), "datetime64[us]")  # an hour logged before expiries: created + TTL
    log.write_hour(W, users, items, np.ones(n, np.float32), np.ones((n, DIM), np.float32), expires)
    return log


def test_a_hit_is_a_request_at_any_hour_while_fresh_and_not_after(tmp_path: Path, make_log: LogFactory) -> None:
    log = make_log(
        [
            (W - H, 3, [30]),  # before the pair was written
            (W + 2 * H + timedelta(minutes=30), 1, [10, 99]),  # the 3rd hour after writing: a hit
            (END, 2, [20]),  # the first instant after expiry: not one
            (END + 2 * H, 4, [40]),
        ]
    )
    codes = _codes(tmp_path, [(1, 10), (2, 20), (3, 30), (4, 40)])

    found = quality.hit_rate_ttl(log, codes, END, TTL)

    assert found == {"ttl_pairs": 4, "ttl_hits": 1, "hit_rate_ttl": 0.25}
    assert quality.hit_rate(log, codes, W + H)["previous_hits"] == 0  # the same-hour rate misses that hit
    assert quality.hit_rate_ttl(log, codes, END + H, TTL) == {"ttl_pairs": 0, "ttl_hits": 0}  # nothing written


POOL = [(1, 10), (1, 11), (2, 20), (2, 21), (3, 30)]  # (1, 10) and (2, 20) get requested


def _scored(tmp_path: Path, make_log: LogFactory, scores: list[float], requested: list[tuple[int, int]]) -> dict:
    log = make_log([(W + i * H, u, [i_]) for i, (u, i_) in enumerate(requested)] + [(W - 3 * H, 9, [90])])
    pool = pd.DataFrame(POOL, columns=["user_id", "item_id"]).assign(score=scores)
    scores_log = ScoreLog(tmp_path / "scores", "fm1-ae1-d2")
    scores_log.write_pool(W, pool, pool.iloc[:2])
    return quality.requested_auc(log, scores_log, END, TTL)


@pytest.mark.parametrize(
    ("scores", "auc"),
    [
        ([5.0, -1.0, 3.0, -2.0, 0.0], 1.0),  # the requested pairs score highest: a perfect ranking
        ([-5.0, 1.0, -3.0, 2.0, 0.0], 0.0),  # reversed
        ([0.5, 0.5, 0.9, 0.1, 0.5], 5 / 6),  # ties count a half: (1 + 0.5 + 0.5 + 1 + 1 + 1) / 6
    ],
)
def test_the_selector_auc_on_a_planted_pool(
    tmp_path: Path, make_log: LogFactory, scores: list[float], auc: float
) -> None:
    found = _scored(tmp_path, make_log, scores, [(1, 10), (2, 20)])

    assert found["requested_auc"] == pytest.approx(auc)
    assert (found["scored_pairs"], found["scored_requested"]) == (5, 2)


def test_the_selector_auc_is_absent_when_one_label_is(tmp_path: Path, make_log: LogFactory) -> None:
    none_requested = _scored(tmp_path / "a", make_log, [1.0, 2.0, 3.0, 4.0, 5.0], [(8, 80)])
    late = _scored(tmp_path / "b", make_log, [1.0, 2.0, 3.0, 4.0, 5.0], [(8, 80)] * TTL + [(1, 10)])  # after expiry

    assert none_requested == {"scored_pairs": 5, "scored_requested": 0}
    assert late == {"scored_pairs": 5, "scored_requested": 0}


def test_the_score_log_round_trip_and_a_rerun_replaces_the_hour(tmp_path: Path) -> None:
    scores_log = ScoreLog(tmp_path / "scores", "fm1-ae1-d2")
    pool = pd.DataFrame({"user_id": [1, 1, 2], "item_id": [10, 11, 10], "source": "x", "score": [0.5, -1.5, 2.0]})
    scores_log.write_pool(W, pool.iloc[:2], pool.iloc[[1]])
    scores_log.write_pool(W, pool, pool.iloc[[2, 0]])  # the rerun of the hour

    got = scores_log.read(W, W + H)

    assert got.user_ids.tolist() == [1, 1, 2] and got.item_ids.tolist() == [10, 11, 10]
    assert got.scores.dtype == np.float32 and got.scores.tolist() == [0.5, -1.5, 2.0]
    assert got.selected.tolist() == [True, False, True]
    assert (got.created_at == np.datetime64(W.replace(tzinfo=None), "us")).all()
    assert len(scores_log.read(W + H, W + 2 * H).user_ids) == 0


def test_the_score_log_prunes_whole_hours(tmp_path: Path) -> None:
    scores_log = ScoreLog(tmp_path / "scores", "fm1-ae1-d2")
    one = pd.DataFrame({"user_id": [1], "item_id": [10], "score": [1.0]})
    for i in range(30):  # two days' dt= folders
        scores_log.write_pool(W - i * H, one, one)

    assert scores_log.prune(W - 24 * H) == 5
    assert available_hours(scores_log.path) == [W - i * H for i in range(24, -1, -1)]
    assert not any(scores_log.path.glob("dt=*/hour=*/.*"))
    assert scores_log.prune(W - 24 * H) == 0


def test_the_expire_step_prunes_the_score_log_beside_the_code_log(tmp_path: Path) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    with open_store(settings.store_url, init=True):
        pass
    run = HourRun(
        run_key(W), W, W + H, "3", "2", "7", "ctr", "fm3-ae2-d4", 4, PrecomputeParams(code_log_retention_hours=30)
    )
    scores_log = run_files.code_log(settings, run).score_log
    assert scores_log.path == settings.data_dir / "precompute" / "scores" / "fm3-ae2-d4"
    one = pd.DataFrame({"user_id": [1], "item_id": [10], "score": [1.0]})
    for i in range(35):
        scores_log.write_pool(W - i * H, one, one)

    meta = nodes.expire(run, settings)

    assert meta["expired_score_log_hours"] == 4 and meta["expired_code_log_hours"] == 0
    assert available_hours(scores_log.path)[0] == W - 30 * H


def test_the_hit_ceiling_is_the_pools_requested_pairs_per_pair_written_at_most_one() -> None:
    assert quality.hit_ceiling(30, 120) == 0.25
    assert quality.hit_ceiling(500, 120) == 1.0  # the pool had more requested pairs than the run could write
    assert quality.hit_ceiling(3, 0) is None  # nothing written: no rate to bound
    assert quality.hit_ceiling(None, 120) is None  # the run scored no pool (a shadow's codes)


def test_fm_calls_per_covered_candidate_and_its_inverse() -> None:
    assert quality.calls_per_covered_candidate(40, 10) == {
        "covered_pair_candidates": 40,
        "fm_calls_per_covered_candidate": 0.25,
        "covered_candidates_per_fm_call": 4.0,
    }
    assert quality.calls_per_covered_candidate(0, 10) == {
        "covered_pair_candidates": 0,
        "covered_candidates_per_fm_call": 0.0,
    }
    assert quality.calls_per_covered_candidate(5, 0) == {
        "covered_pair_candidates": 5,
        "fm_calls_per_covered_candidate": 0.0,
    }
    assert quality.calls_per_covered_candidate(5, None) == {"covered_pair_candidates": 5}
