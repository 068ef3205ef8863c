"""The budget selector's cost on 2 cores: pairs scored per second from the request log to the chosen pairs
(demand features, the demand model's forward, the budget cut), against a bare torch forward of the same
model on the same rows (the floor: what scoring costs with the features already in memory).

A generated world (the ``default`` preset, or ``tiny`` with --quick) supplies one precompute hour's pool;
the model is trained on the day before it, as the training DAG would. Prints seconds per stage, pairs per
second, and each stage's ratio to the bare forward.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from datetime import timedelta
from pathlib import Path

import numpy as np
import torch

from solaris.data.synthetic import PRESETS, generate_world
from solaris.models.demand import predict
from solaris.models.training import FitConfig
from solaris.precompute.budget import pair_values, select_within_budget
from solaris.precompute.demand_features import demand_features
from solaris.precompute.params import PrecomputeParams
from solaris.training.demand_fit import DemandPlan, labelled_pool, train_demand

TTL, BUDGET = 4, 60_000


def timed(work):  # type: ignore[no-untyped-def]
    started = time.perf_counter()
    result = work()
    return result, time.perf_counter() - started


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="the tiny world")
    args = parser.parse_args(argv)
    torch.set_num_threads(2)
    with tempfile.TemporaryDirectory() as tmp:
        log = generate_world(PRESETS["tiny" if args.quick else "default"].with_seed(0), Path(tmp) / "w", progress=False)
        at = log.end - timedelta(hours=12)
        plan = DemandPlan(
            train_hours=12, valid_hours=2, fit=FitConfig(epochs=3, batch_size=4096, progress=False, threads=2)
        )
        model = train_demand(log, at, TTL, plan).model
        pool, _ = labelled_pool(log, at, TTL)
        features, t_features = timed(lambda: demand_features(log, pool, at, TTL))
        probs, t_predict = timed(lambda: predict(model, features))
        scored = pool.assign(demand=probs, score=pair_values(probs, np.ones(len(probs))))
        _, t_cut = timed(lambda: select_within_budget(scored, BUDGET, PrecomputeParams.min_demand))
        x = torch.as_tensor(features)
        with torch.inference_mode():
            _, t_bare = timed(lambda: model(x))
    n = len(pool)
    total = t_features + t_predict + t_cut
    print(f"pool of {n:,} pairs at {at:%Y-%m-%d %H}:00, budget {BUDGET:,}")
    print(f"{'stage':<28}{'seconds':>9}{'pairs/s':>14}{'vs bare forward':>17}")
    for name, seconds in (
        ("demand features", t_features),
        ("demand model (predict)", t_predict),
        ("budget cut", t_cut),
        ("selector total", total),
        ("bare torch forward", t_bare),
    ):
        print(f"{name:<28}{seconds:>9.3f}{n / seconds:>14,.0f}{seconds / t_bare:>16.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
