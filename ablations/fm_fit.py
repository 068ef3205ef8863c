"""Ablation (not a headline figure): how the FM's stopping rule and regularisation move its NE on a world's
evaluation hours, under the replay's FM protocol: trained on the replay's training span as ``train_all``
splits it, then fine-tuned once on every hour up to a day before the evaluation span (the version that
serves it), its click head Platt-scaled on that day.

``before`` is the FM as trained until this ablation (at most 6 epochs, patience 1, dropout 0.1, weight decay
1e-6); ``now`` is ``TrainPlan``'s and ``FMConfig``'s defaults (patience 3, dropout 0.3, weight decay 1e-4).

    .venv/bin/python ablations/fm_fit.py var/worlds/ml100k --seeds 0 1 2
"""

from __future__ import annotations

import sys
from dataclasses import replace

import numpy as np
import torch
from ablation_cli import log_parser

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR
from solaris.eval.spans import ReplaySpans
from solaris.models import metrics
from solaris.models.calibration import PlattScaling
from solaris.models.features import fm_matrix, labels
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.training import FitConfig, train_fm
from solaris.training.jobs import TrainPlan, World
from solaris.training.refresh import refresh_spans

ARMS = {
    "before": (replace(FMConfig(), dropout=0.1), {"epochs": 6, "patience": 1, "weight_decay": 1e-6}),
    "now": (FMConfig(), {}),
}


def main(argv: list[str] | None = None) -> int:
    parser = log_parser(__doc__, seeds=True)
    args = parser.parse_args(argv)
    torch.set_num_threads(1)
    log = EventLog(args.world)
    spans = ReplaySpans.of(log)
    refreshed_at = spans.eval.start - 24 * HOUR
    first, refreshed = (World.open(args.world, TrainPlan().fractions, until=t) for t in (spans.train.end, refreshed_at))
    scored = log.impressions(spans.eval.start, spans.eval.end)
    calibration = log.impressions(refreshed_at, spans.eval.start)
    train, valid = refresh_spans(refreshed, refreshed_at, valid_hours=2)  # the replay's default valid_hours
    print(
        f"ABLATION {args.world.name}: {scored.num_rows} evaluation impressions; NE raw / Platt-scaled on the day before"
    )
    print("seed  arm      epochs (first, refresh)  first FM           refreshed FM")
    for seed in args.seeds:
        for arm, (config, changes) in ARMS.items():
            fit = replace(TrainPlan(fit=FitConfig(seed=seed, progress=False, threads=1)).fm_fit, **changes)
            fm, a = train_fm(
                log, first.split.fm_train, first.split.valid, first.index, first.users, first.items, config, fit
            )
            fm_refreshed, b = train_fm(
                log, train, valid, refreshed.index, refreshed.users, refreshed.items, fit_config=fit, start_from=fm
            )
            ne = [_ne(m, scored, calibration, first) for m in (fm, fm_refreshed)]
            print(
                f"{seed:>4}  {arm:<7}  {len(a.valid_loss):>2} ({a.best_epoch + 1} best), {len(b.valid_loss):>2} ({b.best_epoch + 1} best)"
                f"     {ne[0][0]:.4f} / {ne[0][1]:.4f}    {ne[1][0]:.4f} / {ne[1][1]:.4f}",
                flush=True,
            )
    return 0


def _ne(fm: FoundationModel, scored, calibration, world: World) -> tuple[float, float]:  # noqa: ANN001 - pyarrow tables
    """(raw NE, NE once Platt-scaled on ``calibration``) on ``scored``."""
    prob, fitted = (
        embed(fm, fm_matrix(t, world.index, fm.config.history), device="cpu").probs[:, 0] for t in (scored, calibration)
    )
    click = labels(scored)[:, 0]
    calibrated = PlattScaling.fit(fitted, labels(calibration)[:, 0])(prob)
    return metrics.summary(click, prob)["ne"], metrics.summary(click, np.asarray(calibrated))["ne"]


if __name__ == "__main__":
    sys.exit(main())
