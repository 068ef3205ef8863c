"""The VM input matrix as the ranker builds it: absent tiers zeroed, flags kept, versions enforced; validation
and the gate score pair codes on the share of rows serving has them."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from solaris.embedding_version import VersionMismatch
from solaris.models import metrics
from solaris.models.features import TIERS, VM_BASE_COLUMNS, IdTable
from solaris.models.vm import VerticalModel, VMConfig, score
from solaris.models.vm_data import SERVED_PAIR_COVERAGE, VMData, vm_inputs
from solaris.training.jobs import vm_eval
from solaris.vms import VMSpec

CONFIG = VMConfig(variant="solaris", code_dim=2, embedding_version="fm3-ae4-d2")
# ids, hour, position, then the six log1p exposure counters
BASE = np.array([[1, 2, 3, 0, *[0.5] * 6], [4, 5, 6, 1, *[1.5] * 6]], np.float32)
B = len(VM_BASE_COLUMNS)  # where the tiers start


def tiers(flags: list[float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    codes = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
    return {tier: (codes + k, np.array(flags, np.float32)) for k, tier in enumerate(TIERS)}


def test_absent_codes_are_zeroed_and_flagged() -> None:
    x = vm_inputs(CONFIG, "fm3-ae4-d2", BASE, tiers([1.0, 0.0]))
    assert x.shape == (2, len(CONFIG.columns()))
    np.testing.assert_array_equal(x[:, :B], BASE)
    np.testing.assert_array_equal(x[0, B : B + 3], [0.5, -1.0, 1.0])  # pair present
    np.testing.assert_array_equal(x[1, B : B + 3], [0.0, 0.0, 0.0])  # pair absent: zeros, flag 0
    np.testing.assert_array_equal(x[0, B + 6 : B + 9], [2.5, 1.0, 1.0])  # knn tier = codes + 2
    np.testing.assert_array_equal(x[0, B + 9 : B + 12], [3.5, 2.0, 1.0])  # a2a tier = codes + 3, last


def test_embeddings_of_another_version_are_refused() -> None:
    message = "expects embedding version fm3-ae4-d2, got embeddings of version fm3-ae5-d2"
    with pytest.raises(VersionMismatch, match=message):
        vm_inputs(CONFIG, "fm3-ae5-d2", BASE, tiers([1.0, 1.0]))


def test_base_variant_ignores_embeddings() -> None:
    np.testing.assert_array_equal(vm_inputs(VMConfig(), "anything", BASE, {}), BASE)


def examples(
    base: np.ndarray, pair: np.ndarray, agg_flag: np.ndarray, served: np.ndarray, **columns: np.ndarray
) -> VMData:
    """VM examples with every label and FM head zero and every row at position 0 unless given."""
    n = len(base)
    zeros = np.zeros((n, 2), np.float32)
    return VMData(
        base=base,
        labels=columns.get("labels", zeros),
        fm_probs=columns.get("fm_probs", zeros),
        position=columns.get("position", np.zeros(n, np.int64)),
        pair=pair,
        agg=pair,
        agg_flag=agg_flag,
        embedding_version="fm3-ae4-d2",
        pair_served=served,
        head=0,
    )


def test_first_stage_examples_hold_no_neighbour_or_a2a_values() -> None:
    """Only served rows carry those tiers; the first stage learns from pair codes and aggregates alone."""
    ones = np.ones((2, 2), np.float32)
    x = examples(BASE, ones, np.ones(2), ones).matrix(CONFIG)
    np.testing.assert_array_equal(x[:, B : B + 6], 1.0)  # pair and aggregate, flags set
    np.testing.assert_array_equal(x[:, B + 6 :], 0.0)  # knn and a2a: zeros, flags 0


def test_validation_and_the_gate_see_pair_codes_on_the_served_share_of_rows_the_same_for_every_model() -> None:
    n = 4000
    ones = np.ones((n, 2), np.float32)
    base = np.zeros((n, B), np.float32)
    data = examples(base, ones, np.ones(n), 2 * ones)
    pair_flag = data.served_like(CONFIG)[:, B + 2]
    assert abs(pair_flag.mean() - SERVED_PAIR_COVERAGE) < 0.03  # never 100%, as serving never has it
    np.testing.assert_array_equal(data.served_like(CONFIG)[:, B + 2], pair_flag)  # a challenger and its champion alike
    served_like, built = data.served_like(CONFIG), data.matrix(CONFIG)
    np.testing.assert_array_equal(served_like[:, B + 3 :], built[:, B + 3 :])  # other tiers as built
    present = pair_flag == 1
    np.testing.assert_array_equal(served_like[present, B : B + 2], 2.0)  # the codes as old as serving has them
    np.testing.assert_array_equal(built[:, B : B + 2], 1.0)  # training's: as of the hour


def test_the_gates_ne_is_scored_on_the_served_like_inputs() -> None:
    rng = np.random.default_rng(1)
    n, table = 500, IdTable(np.zeros((8, 1), np.int64), ("x_a",))
    codes = rng.normal(size=(n, 2)).astype(np.float32)
    click = (codes[:, 0] > 0).astype(np.float32)  # the pair code decides: masking it must change the NE
    labels = np.stack([click, np.zeros(n, np.float32)], axis=1)
    data = examples(np.zeros((n, B), np.float32), codes, np.zeros(n), codes, labels=labels)
    vm = VerticalModel(CONFIG, table, table)
    with torch.no_grad():
        for p in vm.parameters():
            p.copy_(torch.as_tensor(rng.normal(scale=0.3, size=p.shape), dtype=torch.float32))
    served_like = metrics.summary(click, score(vm, data.served_like(CONFIG)))["ne"]
    assert vm_eval(vm, data)["ne"] == pytest.approx(served_like)
    assert served_like != pytest.approx(metrics.summary(click, score(vm, data.matrix(CONFIG)))["ne"])


def test_each_vm_learns_its_own_label_at_its_own_positions_distilling_the_matching_fm_head() -> None:
    n = 6
    labels = np.array([[1, 1], [1, 0], [0, 0], [1, 1], [0, 0], [1, 0]], np.float32)  # click, conversion
    fm_probs = np.array([[0.5, 0.1]] * n, np.float32)
    position = np.arange(n, dtype=np.int64)
    codes = np.arange(2 * n, dtype=np.float32).reshape(n, 2)
    data = examples(
        np.zeros((n, B), np.float32), codes, np.ones(n), codes, labels=labels, fm_probs=fm_probs, position=position
    )
    distils = VMConfig(variant="solaris_distilled", distill_alpha=0.5)

    cvr = data.for_vm(VMSpec("cvr", "conversion"))
    np.testing.assert_array_equal(cvr.label, labels[:, 1])
    np.testing.assert_allclose(cvr.targets(distils), 0.5 * labels[:, 1] + 0.5 * 0.1)  # the conversion head
    top = data.for_vm(VMSpec("ctr_top", "click", positions=(1, 3)))
    np.testing.assert_array_equal(top.position, [1, 2, 3])
    np.testing.assert_array_equal(top.label, labels[1:4, 0])
    np.testing.assert_array_equal(top.pair, codes[1:4])  # every column cut to the same rows
    np.testing.assert_allclose(top.targets(distils), 0.5 * labels[1:4, 0] + 0.5 * 0.5)
    with pytest.raises(ValueError, match=r"VM far \(click at positions 9-9\): no impressions at those positions"):
        data.for_vm(VMSpec("far", "click", positions=(9, 9)))
