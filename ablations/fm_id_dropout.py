"""Ablation (not a headline figure): the FM's NE on a world's evaluation hours, for the users and items its
training never saw and for the rest, at several ``FMConfig.id_dropout`` rates, the FM frozen after its
training span (the regime where unseen ids are most common). The unseen-id fallback is on at every rate.

    .venv/bin/python ablations/fm_id_dropout.py var/worlds/default --rates 0,0.1,0.3,0.5 --seed 0
"""

from __future__ import annotations

import argparse
import sys
from dataclasses import replace
from pathlib import Path

import numpy as np
import torch

from solaris.models import metrics
from solaris.models.features import fm_matrix, labels
from solaris.models.fm import FMConfig, embed
from solaris.models.training import FitConfig, train_fm
from solaris.training.jobs import World


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world", type=Path, help="an event log folder (var/worlds/<name>)")
    parser.add_argument("--rates", default="0,0.3", help="comma-separated id_dropout rates (default 0,0.3)")
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    world = World.open(args.world)
    split = world.split
    shown = world.log.impressions(split.eval.start, split.eval.end)
    click, x = labels(shown)[:, 0], fm_matrix(shown, world.index, FMConfig().history)
    trained_on = world.log.impressions(split.fm_train.start, split.fm_train.end, ["user_id", "item_id"])
    new_user = ~np.isin(shown["user_id"].to_numpy(), trained_on["user_id"].to_numpy())
    new_item = ~np.isin(shown["item_id"].to_numpy(), trained_on["item_id"].to_numpy())
    rows = {"all": np.ones(len(click), bool), "new users": new_user, "known users": ~new_user, "new items": new_item}
    print(f"ABLATION {args.world.name}, seed {args.seed}: {len(click)} evaluation impressions, "
          f"{new_user.mean():.1%} of new users, {new_item.mean():.1%} of new items")  # fmt: skip
    print("id_dropout  epochs  " + "  ".join(f"{name:>14}" for name in rows))
    for rate in (float(r) for r in args.rates.split(",")):
        config, fit = replace(FMConfig(), id_dropout=rate), FitConfig(seed=args.seed, progress=False)
        fm, result = train_fm(world.log, split.fm_train, split.valid, world.index, world.users, world.items, config, fit)
        prob = embed(fm, x, device="cpu").probs[:, 0]
        ne = {k: metrics.summary(click[m], prob[m])["ne"] if m.sum() >= 100 else float("nan") for k, m in rows.items()}
        print(f"{rate:>10.2f}  {result.best_epoch + 1:>6}  " + "  ".join(f"{f'NE {v:.4f}':>14}" for v in ne.values()))
    return 0


if __name__ == "__main__":
    sys.exit(main())
