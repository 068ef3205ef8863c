"""The VM variants a replay compares, their refresh on served hours and their scores.

Every variant starts from a first-stage VM trained on the training span and is refreshed on the same
served hours with the same fit settings, so all are equally fresh. The SOLARIS variants differ only in
the embedding tiers they may see (the others are zeroed, flag included) and in the distillation target.
The new-user cohort code feeds the pair input (:mod:`solaris.enrichment.cohorts`): a variant without it sees
the pair input zeroed on the rows it fed.
"""

from __future__ import annotations

from dataclasses import dataclass, replace

import numpy as np

from solaris.enrichment.tiers import COHORT, FED_BY
from solaris.eval.events import ServedEvents
from solaris.eval.protocol import ALL_TIERS, VM_BASE
from solaris.models.training import FitConfig, refresh_vm
from solaris.models.vm import BASE_VARIANT, TIERS, VerticalModel, score, tier_columns


@dataclass(frozen=True)
class Variant:
    name: str
    first_stage: str  # the TrainPlan variant whose weights it starts from
    tiers: tuple[str, ...]  # embedding tiers it sees; () for the VMs without embeddings
    distill: bool

    @property
    def reads_fm(self) -> bool:
        """Whether its inputs or its target come from the FM: it may only learn from one FM version's output."""
        return bool(self.tiers) or self.distill


def _tier_ladder() -> tuple[Variant, ...]:
    """SOLARIS VMs that see the tiers of the feeding order cumulatively (``SOLARIS pair``, ``SOLARIS +a2a``,
    ...): two neighbours differ by one tier only, so their NE difference is that tier's contribution."""
    first, *rest = FED_BY
    ladder = [Variant(f"SOLARIS {first}", "solaris", (first,), False)]
    for tier in rest:
        ladder.append(Variant(f"SOLARIS +{tier}", "solaris", (*ladder[-1].tiers, tier), False))
    return tuple(ladder)


TIER_LADDER = _tier_ladder()
# The ladder adds A2A before the aggregate; this ablation drops it from the full set, so the report also
# shows what A2A adds once every other tier is there (labelled an ablation: never the headline).
WITHOUT_A2A = Variant("SOLARIS all but a2a (ablation)", "solaris", tuple(t for t in FED_BY if t != "a2a"), False)
VARIANTS = (
    Variant(VM_BASE, BASE_VARIANT, (), False),
    Variant("VM distilled", "distilled", (), True),
    *TIER_LADDER,
    WITHOUT_A2A,
    Variant("SOLARIS all+distill", "solaris_distilled", FED_BY, True),
)
# (tier, the variant without it, the variant with it): the base VM stands for "no tier" before the first.
TIER_STEPS = tuple(
    (v.tiers[-1], "VM base" if k == 0 else TIER_LADDER[k - 1].name, v.name) for k, v in enumerate(TIER_LADDER)
)
if TIER_LADDER[-1].name != ALL_TIERS:
    raise ValueError(f"the tier ladder ends in {TIER_LADDER[-1].name!r}; eval.protocol.ALL_TIERS says {ALL_TIERS!r}")
SWEEP_VARIANT = ALL_TIERS  # all tiers, no distillation: NE against coverage without a second effect


def variant(name: str) -> Variant:
    for v in VARIANTS:
        if v.name == name:
            return v
    raise KeyError(f"no VM variant {name!r}")


def inputs(v: Variant, events: ServedEvents, code_dim: int) -> np.ndarray:
    if not v.tiers:
        return events.base
    x = events.served.copy()
    for tier in TIERS:
        if tier not in v.tiers:
            x[:, tier_columns(code_dim, tier)] = 0.0
    if "cohort" not in v.tiers:
        x[events.tiers == COHORT, tier_columns(code_dim, "pair")] = 0.0
    return x


def targets(v: Variant, events: ServedEvents, alpha: float) -> np.ndarray:
    if not v.distill:
        return events.label
    return ((1 - alpha) * events.label + alpha * events.fm_prob).astype(np.float32)


def refresh(
    v: Variant,
    start: VerticalModel,
    train: ServedEvents,
    valid: ServedEvents,
    fit: FitConfig,
    embedding_version: str,
    keep_start: bool = False,
) -> tuple[VerticalModel, float]:
    """Train a copy of ``start`` further on served hours; validation scores hard labels. A variant that
    reads embeddings then records ``embedding_version``, the only version it was refreshed on. Returns the
    model and its loss on the validation rows."""
    dim, alpha = start.config.code_dim, start.config.distill_alpha
    model, result = refresh_vm(
        start,
        (inputs(v, train, dim), targets(v, train, alpha)),
        (inputs(v, valid, dim), valid.label),
        fit,
        f"refresh {v.name}",
        keep_start,
    )
    if model.config.uses_embeddings:
        model.config = replace(model.config, embedding_version=embedding_version)
    return model, result.best_valid_loss


def predict(v: Variant, model: VerticalModel, events: ServedEvents) -> np.ndarray:
    """The variant's probability of the events' label, from the inputs it may see."""
    return score(model, inputs(v, events, model.config.code_dim))
