"""What a pair code is worth per fallback: the serving VM's loss without the code minus with it."""

from __future__ import annotations

import numpy as np
import pytest

from solaris.models.vm import score, tier_columns
from solaris.training.demand_gains import MIN_ROWS, consumers_gains, fallback_gains
from solaris.training.jobs import TrainReport


def rows(vm, n: int, rng: np.random.Generator, pair: bool, agg: bool) -> np.ndarray:  # type: ignore[no-untyped-def]
    dim = vm.config.code_dim
    x = np.zeros((n, len(vm.config.columns())), np.float32)
    x[:, :4] = [3, 5, 12, 0]  # user, item, hour, position
    for tier, present in (("pair", pair), ("agg", agg)):
        if present:
            cols = tier_columns(dim, tier)
            x[:, cols.start : cols.stop - 1] = rng.normal(size=(n, dim))
            x[:, cols.stop - 1] = 1
    return x


def test_gains_follow_the_labels_the_pair_code_predicts(trained: tuple[object, object, TrainReport]) -> None:
    vm = trained[2].vms["ctr"]["solaris"].model
    rng = np.random.default_rng(0)
    served = np.concatenate(
        [rows(vm, 400, rng, True, True), rows(vm, 400, rng, True, False), rows(vm, 300, rng, False, True)]
    )
    without = served.copy()
    without[:, tier_columns(vm.config.code_dim, "pair")] = 0
    # clicks where the pair code raises the VM's probability: the code helps on every pair-fed row
    click = (score(vm, served) > score(vm, without)).astype(np.float32)
    own = np.arange(len(served)) < 800  # every pair-fed row holds the user's own pair code
    gains = fallback_gains(vm, served, click, own)
    assert set(gains) == {"aggregate", "no_aggregate"} and min(gains.values()) > 1e-4
    flipped = fallback_gains(vm, served, 1 - click, own)  # the opposite labels: the code hurts, floored
    assert max(flipped.values()) == 1e-4
    assert fallback_gains(vm, served[800:], click[800:], own[800:]) == {}  # no pair-fed rows: nothing to estimate
    assert MIN_ROWS <= 400


def test_a_new_users_cohort_code_is_not_counted_as_a_pair_code(trained: tuple[object, object, TrainReport]) -> None:
    """Cohort codes fill the pair input of new users, who have no aggregate: counting them would price the
    no-aggregate fallback by a cohort code's gain. Only the rows of the user's own code are measured."""
    vm = trained[2].vms["ctr"]["solaris"].model
    rng = np.random.default_rng(1)
    own, cohort_fed = rows(vm, 400, rng, True, True), rows(vm, 400, rng, True, False)
    served = np.concatenate([own, cohort_fed])
    without = served.copy()
    without[:, tier_columns(vm.config.code_dim, "pair")] = 0
    helps = score(vm, served) > score(vm, without)
    # clicks where the own code helps and the cohort code hurts: counted, no_aggregate would sit at the floor
    click = np.where(np.arange(len(served)) < 400, helps, ~helps).astype(np.float32)
    gains = fallback_gains(vm, served, click, np.arange(len(served)) < 400)
    alone = fallback_gains(vm, own, click[:400], np.ones(400, bool))
    assert gains == alone and gains["no_aggregate"] == gains["aggregate"] > 1e-4  # one fallback measured, weighed alike


def test_a_pair_code_is_worth_what_it_gains_every_vm_it_serves() -> None:
    per_vm = {"ctr": {"aggregate": 0.02, "no_aggregate": 0.05}, "cvr": {"aggregate": 0.001, "no_aggregate": 0.004}}
    summed = consumers_gains(per_vm)
    assert summed == pytest.approx({"aggregate": 0.021, "no_aggregate": 0.054})
    assert consumers_gains({"ctr": {}, "cvr": per_vm["cvr"]}) == per_vm["cvr"]  # a VM not served yet adds nothing
    assert consumers_gains({}) == {}
