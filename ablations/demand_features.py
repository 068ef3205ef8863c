"""Ablation (not a headline figure): what each group of demand features adds to the demand model's AUC for
"requested as a candidate while fresh", on the validation hours the training job uses (every pair of the
pool, unsampled), trained up to the start of the replay's evaluation span.

Arms drop one group at a time from :data:`solaris.precompute.demand_features.NAMES`; ``all`` is what the
training DAG trains.

    .venv/bin/python ablations/demand_features.py var/worlds/default0 --seeds 0 1 2
"""

from __future__ import annotations

import sys
from dataclasses import replace

import torch
from ablation_cli import log_parser

from solaris.data.eventlog import EventLog
from solaris.eval.spans import ReplaySpans
from solaris.precompute.demand_features import NAMES
from solaris.precompute.params import PrecomputeParams
from solaris.training.demand_fit import DemandPlan, train_demand

GROUPS = {
    "co-visitation": ("pair_covisit_strength",),
    "pair history": tuple(n for n in NAMES if n.startswith("pair_") and n != "pair_covisit_strength"),
    "item popularity": tuple(n for n in NAMES if n.startswith("item_")),
}


def main(argv: list[str] | None = None) -> int:
    parser = log_parser(__doc__, seeds=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    log = EventLog(args.world)
    until = ReplaySpans.of(log).eval.start  # where the replay trains the selector arms' demand model
    ttl = PrecomputeParams.ttl_hours
    arms = {"all": NAMES} | {f"without {g}": tuple(n for n in NAMES if n not in names) for g, names in GROUPS.items()}
    print(f"ABLATION {args.world.name}: demand model trained until {until:%Y-%m-%d %H}:00, ttl {ttl} h")
    print(f"{'seed':>4}  {'arm':<26}{'valid AUC':>10}{'recency AUC':>13}{'valid rows':>12}")
    for seed in args.seeds:
        for arm, features in arms.items():
            plan = DemandPlan(features=features)
            found = train_demand(log, until, ttl, replace(plan, fit=replace(plan.fit, seed=seed))).metrics
            print(
                f"{seed:>4}  {arm:<26}{found['auc']:>10.4f}{found['recency_auc']:>13.4f}{found['valid_rows']:>12,.0f}"
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
