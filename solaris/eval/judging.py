"""One VM on a replay: every variant refreshed on what was served, once per training seed, and every model
scored on the evaluation span's served events.

A variant's NE depends on its training run as well as on its inputs (one run a variant put a tier's
"contribution" anywhere between -0.024 and +0.010 NE on logs where it fed 2% of impressions), so each variant
is trained with every seed of :attr:`VMTraining.seeds` and reported as the mean over them with their spread.

Every variant that reads the FM is refreshed twice: from its own first-stage VM, and from the refreshed base
VM of the same seed with its FM inputs at zero weight (:func:`~solaris.models.vm.from_base`, that start kept
unless an epoch beats it); the one better on the validation hours is kept. On those hours it is never worse
than the base VM, so a tier the VM cannot use costs nothing, and where the first stage learned to read the
tiers that knowledge is kept. ``ablations/vm_tiers.py`` measures the choices.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field, replace
from datetime import datetime

import numpy as np

from solaris.eval.events import FM_PROBS, ServedEvents, hour_index
from solaris.eval.figures import ModelScore, VMFigures
from solaris.eval.protocol import FM, FM_HOURLY, FM_HOURLY_POSITIONED, VM_BASE, VM_SEEDS
from solaris.eval.scoring import score_models
from solaris.eval.variants import VARIANTS, predict, refresh, variant
from solaris.models.calibration import PlattScaling
from solaris.models.training import FitConfig
from solaris.models.vm import BASE_VARIANT, VerticalModel, from_base
from solaris.vms import VMSpec

# Where an FM-reading variant's refresh starts: its own first-stage VM; the refreshed base VM of its seed, its
# FM inputs at zero weight and that start kept unless an epoch beats it; or both, keeping the one better on the
# validation hours (so never worse there than the base VM, and no first-stage knowledge thrown away).
STARTS = ("own", "base", "better")


@dataclass(frozen=True)
class VMTraining:
    """How the replay trains every VM variant on the served hours."""

    seeds: tuple[int, ...] = VM_SEEDS
    start: str = "better"  # what an FM-reading variant is refreshed from: see STARTS
    # Early stopping of every refresh, and the choice of start, read the logging span's last hours: at least
    # valid_hours of them, and as many more as hold valid_share of its served rows. Two hours of MovieLens hold
    # 480 rows, too few to tell a 0.01 NE gain from noise: there every start read alike and the distilled VMs'
    # gain was lost (ablations/vm_tiers.py).
    valid_hours: int = 2
    valid_share: float = 0.1
    fit: FitConfig = field(default_factory=lambda: FitConfig(progress=False, threads=1))

    def __post_init__(self) -> None:
        if not self.seeds or len(set(self.seeds)) != len(self.seeds):
            raise ValueError(f"VM training seeds must be distinct and at least one, got {self.seeds}")
        if self.valid_hours < 1 or not 0.0 <= self.valid_share < 1.0:
            raise ValueError(
                f"validation needs at least one hour and a share in [0, 1), got {self.valid_hours}, {self.valid_share}"
            )
        if self.start not in STARTS:
            raise ValueError(f"VM training start {self.start!r}: choose one of {', '.join(STARTS)}")


@dataclass(frozen=True)
class JudgedVM:
    """One VM on the replay: its variants refreshed once per seed (``refreshed[name][k]`` for the k-th seed)
    and every model's probabilities of its label on the eval span's events (the FM head calibrated; a
    variant's as (seeds, events))."""

    events: ServedEvents
    refreshed: dict[str, list[VerticalModel]]
    probs: dict[str, np.ndarray]
    scores: list[ModelScore]

    def figures(self, spec: VMSpec) -> VMFigures:
        positions = None if spec.positions is None else list(spec.positions)
        positives = int(self.events.label.sum())
        return VMFigures(spec.label, positions, len(self.events), positives, self.scores)

    def first_seed(self) -> dict[str, VerticalModel]:
        """Each variant's model of the first seed: what a single arm of the replay serves."""
        return {name: models[0] for name, models in self.refreshed.items()}


def judge_vm(
    training: VMTraining,
    first_stage: dict[str, VerticalModel],
    logging: ServedEvents,
    evaluation: ServedEvents,
    serving_from: datetime,
    version: str,
    bootstrap_seed: int,
) -> JudgedVM:
    """``first_stage``: the TrainPlan variant name -> its model; ``serving_from``: the first hour the serving
    FM version served (the FM-reading variants learn from no earlier hour)."""
    own = logging.select(logging.hours >= hour_index(serving_from))
    calibrated = calibration(own)
    logging, events = calibrated(logging), calibrated(evaluation)
    runs = [refresh_variants(training, first_stage, logging, serving_from, version, seed) for seed in training.seeds]
    refreshed = {v.name: [run[v.name] for run in runs] for v in VARIANTS}
    probs = {
        FM: events.fm_prob,
        FM_HOURLY: events.fm_prob_hourly,
        FM_HOURLY_POSITIONED: events.fm_prob_hourly_positioned,
    }
    probs |= {name: np.stack([predict(variant(name), m, events) for m in models]) for name, models in refreshed.items()}
    return JudgedVM(events, refreshed, probs, score_models(events.label, events.requests, probs, bootstrap_seed))


def refresh_variants(
    training: VMTraining,
    first_stage: dict[str, VerticalModel],
    logging: ServedEvents,
    serving_from: datetime,
    version: str,
    seed: int,
) -> dict[str, VerticalModel]:
    """Every variant refreshed on all the logging hours it may learn from: one that reads the FM (its codes,
    or its probability as a distillation target) on the hours the serving version served, so it is never fed
    another version's output; the base VM, which reads nothing of the FM, on the whole logging span, as
    production would train it. The last hours (:func:`validation_start`) decide early stopping for all."""
    before_cut = logging.hours < validation_start(logging.hours, training.valid_hours, training.valid_share)
    every_hour = logging.select(before_cut)
    own_hours = logging.select(before_cut & (logging.hours >= hour_index(serving_from)))
    valid = logging.select(~before_cut)
    if not len(own_hours) or not len(valid):
        raise ValueError(
            "the served hours before the eval span are too few to hold the validation hours and training hours"
        )
    fit = replace(training.fit, seed=seed)
    base, _ = refresh(variant(VM_BASE), first_stage[BASE_VARIANT], every_hour, valid, fit, version)
    found = {VM_BASE: base}
    for v in VARIANTS:
        if v.name == VM_BASE:
            continue
        stage, train = first_stage[v.first_stage], own_hours if v.reads_fm else every_hour
        candidates = []
        if training.start in ("own", "better"):
            candidates.append(refresh(v, stage, train, valid, fit, version))
        if training.start in ("base", "better"):
            start = from_base(base, stage.config)
            candidates.append(refresh(v, start, train, valid, fit, version, keep_start=True))
        found[v.name] = min(candidates, key=lambda c: c[1])[0]
    return found


def validation_start(hours: np.ndarray, at_least: int, share: float) -> int:
    """The first validation hour: the fewest last hours, ``at_least`` of them, that hold ``share`` of the rows."""
    distinct, counts = np.unique(hours, return_counts=True)
    held = np.cumsum(counts[::-1])  # rows in the last 1, 2, ... hours
    enough = int(np.argmax(held >= share * held[-1])) + 1 if len(held) else 0
    return (
        int(distinct[::-1][max(enough, at_least) - 1]) if len(distinct) >= max(enough, at_least) else int(hours.min())
    )


def calibration(own: ServedEvents) -> Callable[[ServedEvents], ServedEvents]:
    """The FM head Platt-recalibrated on the serving version's hours before the eval span: two numbers per
    FM probability, fitted on labels the eval never sees."""
    fits = {name: PlattScaling.fit(getattr(own, name), own.label) for name in FM_PROBS}

    def calibrated(events: ServedEvents) -> ServedEvents:
        return replace(events, **{name: fit(getattr(events, name)) for name, fit in fits.items()})

    return calibrated
