"""The replay's VM judging on served events built by hand: every variant trained once per VM training seed
and scored as the mean over its runs, and a tier that only misleads never makes a variant worse than the
base VM on the validation hours."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime

import numpy as np
import pytest
import torch

from solaris.eval.events import ServedEvents, concat, hour_index
from solaris.eval.judging import VMTraining, judge_vm, refresh_variants, validation_start
from solaris.eval.protocol import ALL_TIERS, FM, VM_BASE
from solaris.eval.variants import VARIANTS, inputs, variant
from solaris.models.features import VM_BASE_COLUMNS, IdTable
from solaris.models.training import FitConfig, refresh_vm, vm_loss
from solaris.models.vm import VARIANTS as FIRST_STAGE
from solaris.models.vm import VerticalModel, VMConfig, from_base, tier_columns
from solaris.vms import DEFAULT_VMS

CODE_DIM, VERSION = 4, "fm1-ae1-d4"
FIRST_HOUR = datetime(2026, 1, 5, tzinfo=UTC)
USERS, ITEMS = IdTable(np.zeros((31, 0), np.int64), ()), IdTable(np.zeros((11, 0), np.int64), ())
FIT = FitConfig(epochs=3, patience=3, lr=1e-2, progress=False, threads=1)


def _events(rng: np.random.Generator, first_hour: int, hours: int, per_hour: int, leak: bool) -> ServedEvents:
    """Served rows whose labels no base input predicts; with ``leak`` every tier's first code value is the
    label (what the FM 'knows' on those hours only), else noise."""
    n = hours * per_hour
    label = (rng.random(n) < 0.3).astype(np.float32)
    base = np.zeros((n, len(VM_BASE_COLUMNS)), np.float32)
    base[:, 0], base[:, 1], base[:, 2] = rng.integers(0, 30, n), rng.integers(0, 10, n), rng.integers(0, 24, n)
    base[:, 3] = rng.integers(0, 5, n)
    width = len(VMConfig(variant="solaris", code_dim=CODE_DIM).columns()) - len(VM_BASE_COLUMNS)
    tiers = rng.normal(size=(n, width)).astype(np.float32)
    served = np.concatenate([base, tiers], axis=1)
    for tier in ("pair", "agg", "knn", "a2a"):
        block = tier_columns(CODE_DIM, tier)
        served[:, block.stop - 1] = 1.0  # every tier present
        if leak:
            served[:, block.start] = label * 4
    fm = np.clip(0.3 + 0.4 * (label - 0.3), 0.01, 0.99).astype(np.float32)
    return ServedEvents(
        label=label,
        fm_prob=fm,
        fm_prob_hourly=fm,
        fm_prob_hourly_positioned=fm,
        base=base,
        served=served,
        tiers=np.zeros(n, np.int8),
        hours=first_hour + np.repeat(np.arange(hours), per_hour),
        requests=np.arange(n) // 5,
    )


def _first_stage(train: ServedEvents) -> dict[str, VerticalModel]:
    """Base VMs scoring about the base rate; the SOLARIS ones trained to read the (leaking) tiers."""
    torch.manual_seed(0)
    base = VerticalModel(VMConfig(code_dim=CODE_DIM), USERS, ITEMS)
    with torch.no_grad():
        base.mlp[-1].weight.mul_(0.01)
    base.start_at_base_rate(0.3)
    stages = {}
    for name in FIRST_STAGE:
        config = replace(base.config, variant=name, embedding_version=VERSION if name.startswith("solaris") else "")
        start = from_base(base, config) if config.uses_embeddings else base
        x = inputs(variant(ALL_TIERS), train, CODE_DIM) if config.uses_embeddings else train.base
        stages[name] = (
            refresh_vm(start, (x, train.label), (x, train.label), FIT, name)[0] if config.uses_embeddings else start
        )
    return stages


@pytest.fixture(scope="module")
def served() -> tuple[dict[str, VerticalModel], ServedEvents, ServedEvents, datetime]:
    rng = np.random.default_rng(0)
    start = hour_index(FIRST_HOUR)
    first_stage = _first_stage(_events(rng, start - 20, 6, 300, leak=True))
    # The logging span: the serving version's hours leak (the tiers look useful), its validation hours do not.
    logging = concat([_events(rng, start, 6, 300, leak=True), _events(rng, start + 6, 2, 600, leak=False)])
    evaluation = _events(rng, start + 8, 3, 400, leak=False)
    return first_stage, logging, evaluation, FIRST_HOUR


def test_every_variant_is_trained_once_per_seed_and_scored_over_its_runs(served: tuple) -> None:
    first_stage, logging, evaluation, serving_from = served
    training = VMTraining(seeds=(0, 1), fit=FIT)
    judged = judge_vm(training, first_stage, logging, evaluation, serving_from, VERSION, 0)
    assert set(judged.refreshed) == {v.name for v in VARIANTS}
    assert all(len(models) == 2 for models in judged.refreshed.values())
    assert judged.probs[FM].shape == (len(evaluation),)
    assert judged.probs[ALL_TIERS].shape == (2, len(evaluation))
    scores = {s.name: s for s in judged.scores}
    assert scores[FM].runs == 1 and scores[FM].ne_runs_sd is None
    assert scores[ALL_TIERS].runs == 2 and scores[ALL_TIERS].ne_runs_sd is not None
    first, second = judged.probs[VM_BASE]
    assert not np.allclose(first, second)  # two seeds, two training runs
    figures = judged.figures(DEFAULT_VMS[0])
    assert figures.events == len(evaluation) and figures.models == judged.scores
    assert judged.first_seed()[ALL_TIERS] is judged.refreshed[ALL_TIERS][0]


@pytest.mark.parametrize("start", ["better", "base"])
def test_a_tier_that_only_misleads_never_makes_a_variant_worse_than_the_base_vm_on_the_validation_hours(
    served: tuple, start: str
) -> None:
    first_stage, logging, _, serving_from = served
    valid = logging.select(logging.hours >= hour_index(serving_from) + 6)
    found = refresh_variants(VMTraining(start=start, fit=FIT), first_stage, logging, serving_from, VERSION, 0)

    def loss(name: str) -> float:
        x = inputs(variant(name), valid, CODE_DIM)
        with torch.inference_mode():
            return float(vm_loss(found[name], torch.as_tensor(x), torch.as_tensor(valid.label)))

    for v in VARIANTS:
        if v.tiers:
            assert loss(v.name) <= loss(VM_BASE) + 1e-6, f"{v.name} is worse than the base VM on validation"


def test_refreshed_from_its_own_first_stage_alone_a_misleading_tier_costs(served: tuple) -> None:
    """What the rule above prevents: the first stage learned to read tiers that stop paying."""
    first_stage, logging, _, serving_from = served
    valid = logging.select(logging.hours >= hour_index(serving_from) + 6)
    found = refresh_variants(VMTraining(start="own", fit=FIT), first_stage, logging, serving_from, VERSION, 0)
    with torch.inference_mode():
        x = inputs(variant(ALL_TIERS), valid, CODE_DIM)
        own = float(vm_loss(found[ALL_TIERS], torch.as_tensor(x), torch.as_tensor(valid.label)))
        base = float(vm_loss(found[VM_BASE], torch.as_tensor(valid.base), torch.as_tensor(valid.label)))
    assert own > base + 0.01


def test_validation_takes_the_last_hours_that_hold_a_share_of_the_rows_and_at_least_a_few() -> None:
    hours = np.repeat(np.arange(100, 110), [10, 10, 10, 10, 10, 10, 10, 10, 1, 1])  # two quiet last hours
    assert validation_start(hours, 2, 0.1) == 107  # 2 rows in the last two hours: one more hour, 12 of 82
    assert validation_start(hours, 2, 0.0) == 108
    assert validation_start(hours, 4, 0.1) == 106
    assert validation_start(hours, 2, 0.5) == 104
