"""Ablation (not a headline figure): what the FM gives ids it never trained on, by how its id rows are trained.

The FM is trained on a world's first span as ``train_all`` splits it (its fit: ``TrainPlan.fm_fit``) and
frozen, the regime where unseen ids are most common, then scored on the evaluation hours: NE on every
impression, on the users and on the items its training never saw, and on the rest. Beside it, the norms of
the 'unknown' rows (what every new user and item takes: exactly 0 means the FM knows nothing of a new id but
its side features) and how many trained user rows are exactly zero.

Arms: ``before`` (coupled L2 on the id rows as on every weight, no id hidden: the FM until this ablation);
``no L2 on ids`` (``FitConfig.embedding_decay`` off); ``id dropout`` 0.1 (``FMConfig.id_dropout``, the default)
and 0.3, with the L2. docs/ablations.md holds the figures, and those of a hiding of rare ids only (each id hidden
in about one of its impressions an epoch), which lost to the flat rate everywhere and was removed.

    .venv/bin/python ablations/fm_new_ids.py var/worlds/ml100k --seeds 0 1 2
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import torch
from ablation_cli import log_parser

from solaris.models import metrics
from solaris.models.features import fm_matrix, labels
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.training import FitConfig, train_fm
from solaris.training.jobs import TrainPlan, World

ARMS = {
    "before": (replace(FMConfig(), id_dropout=0.0), {}),
    "no L2 on ids": (replace(FMConfig(), id_dropout=0.0), {"embedding_decay": False}),
    "id dropout 0.1": (replace(FMConfig(), id_dropout=0.1), {}),
    "id dropout 0.3": (replace(FMConfig(), id_dropout=0.3), {}),
}
MIN_ROWS = 100  # fewer impressions than this in a slice: its NE is not shown


def main(argv: list[str] | None = None) -> int:
    parser = log_parser(__doc__, seeds=True)
    parser.add_argument("--arms", nargs="+", default=list(ARMS), choices=list(ARMS), metavar="ARM")
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    world = World.open(args.world)
    split = world.split
    shown = world.log.impressions(split.eval.start, split.eval.end)
    click, x = labels(shown)[:, 0], fm_matrix(shown, world.index, FMConfig().history)
    trained_on = world.log.impressions(split.fm_train.start, split.fm_train.end, ["user_id", "item_id"])
    new_user = ~np.isin(shown["user_id"].to_numpy(), trained_on["user_id"].to_numpy())
    new_item = ~np.isin(shown["item_id"].to_numpy(), trained_on["item_id"].to_numpy())
    rows = {
        "all": np.ones(len(click), bool),
        "new users": new_user,
        "new items": new_item,
        "known both": ~new_user & ~new_item,
    }
    print(
        f"ABLATION {args.world.name}: {len(click)} evaluation impressions, {new_user.mean():.1%} of new users, "
        f"{new_item.mean():.1%} of new items; FM frozen after its training span"
    )
    print(
        f"seed  {'arm':<20} epochs  "
        + "  ".join(f"{name:>10}" for name in rows)
        + "  |unknown| user/item  zero user rows"
    )
    for seed in args.seeds:
        for arm in args.arms:
            config, changes = ARMS[arm]
            fit = replace(TrainPlan(fit=FitConfig(seed=seed, progress=False, threads=1)).fm_fit, **changes)
            fm, result = train_fm(
                world.log, split.fm_train, split.valid, world.index, world.users, world.items, config, fit
            )
            prob = embed(fm, x, device="cpu").probs[:, 0]
            ne = [
                metrics.summary(click[m], prob[m])["ne"] if m.sum() >= MIN_ROWS else float("nan") for m in rows.values()
            ]
            print(
                f"{seed:>4}  {arm:<20} {result.best_epoch + 1:>6}  "
                + "  ".join(f"{v:>10.4f}" for v in ne)
                + f"  {_unknown_norm(fm, 'user'):.3f} / {_unknown_norm(fm, 'item'):.3f}  {_zero_rows(fm):>6}",
                flush=True,
            )
    return 0


def _unknown_norm(fm: FoundationModel, side: str) -> float:
    return float(getattr(fm, side).ids.weight[0].detach().norm())


def _zero_rows(fm: FoundationModel) -> int:
    """Trained user rows whose id embedding is exactly zero."""
    norms = fm.user.ids.weight.detach().norm(dim=1)
    return int(((norms == 0) & fm.user.trained).sum())


if __name__ == "__main__":
    sys.exit(main())
