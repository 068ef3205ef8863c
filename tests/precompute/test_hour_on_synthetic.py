"""The precompute blocks chained as the hourly DAG chains them, on the tiny synthetic world."""

from __future__ import annotations

from datetime import datetime, timedelta
from pathlib import Path

import numpy as np
import pandas as pd

from solaris.data.synthetic import PRESETS, generate_world
from solaris.precompute.candidates import generate_candidates
from solaris.precompute.fm_pool import REQUEUE, add_requeued, drop_still_fresh, requeue_misses
from solaris.precompute.staging import Staging
from solaris.precompute.verifier import select_top_fraction


def every_third_pair_fresh(users: np.ndarray, items: np.ndarray, t: datetime) -> np.ndarray:
    return (users + items) % 3 == 0


def pairs(frame: pd.DataFrame) -> set[tuple[int, int]]:
    return set(zip(frame["user_id"], frame["item_id"], strict=True))


def test_one_hour_of_precompute_blocks(tmp_path: Path) -> None:
    log = generate_world(PRESETS["tiny"], tmp_path / "world")
    start = log.start + timedelta(hours=30)
    candidates = generate_candidates(log, start, start + timedelta(hours=1))
    requeued = requeue_misses(log, start, every_third_pair_fresh)
    assert len(candidates) and len(requeued)

    pool = add_requeued(candidates, requeued)
    assert pairs(pool) == pairs(candidates) | pairs(requeued) and len(pool) == len(pairs(pool))
    assert pairs(pool[pool["source"] == REQUEUE]) == pairs(requeued)

    pool = drop_still_fresh(pool, every_third_pair_fresh, start + timedelta(hours=1))
    assert not every_third_pair_fresh(pool["user_id"].to_numpy(), pool["item_id"].to_numpy(), start).any()
    scored = pool.assign(score=np.random.default_rng(0).random(len(pool)))
    chosen = select_top_fraction(scored, top_fraction=0.2, per_user_cap=10)
    assert pairs(chosen[chosen["forced"]]) == pairs(requeued)
    speculative = pool[pool["source"] != REQUEUE]
    within_cap = speculative.groupby("user_id").size().clip(upper=10).sum()
    assert (~chosen["forced"]).sum() == min(int(np.ceil(0.2 * len(speculative))), within_cap)

    staging = Staging(tmp_path / "staging", "scheduled__" + start.isoformat())
    meta = staging.write("selected", chosen)
    assert meta["rows"] == len(chosen)
    pd.testing.assert_frame_equal(staging.read("selected").to_pandas(), chosen)
