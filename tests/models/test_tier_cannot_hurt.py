"""A tier never makes the VM worse: a SOLARIS VM starts as the base VM (its FM inputs at zero weight) and keeps
that start unless training beats it on the validation hours, so an input that does not help is left alone."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import torch

from solaris.models.features import VM_BASE_COLUMNS, IdTable
from solaris.models.training import FitConfig, refresh_vm, train_vm, vm_loss
from solaris.models.vm import VerticalModel, VMConfig, from_base, score
from solaris.models.vm_data import VMData

USERS = IdTable(np.zeros((21, 0), np.int64), ())
ITEMS = IdTable(np.zeros((11, 0), np.int64), ())
CODE_DIM = 4
SOLARIS = VMConfig(variant="solaris", code_dim=CODE_DIM)


def _base_rows(rng: np.random.Generator, n: int) -> np.ndarray:
    x = np.zeros((n, len(VM_BASE_COLUMNS)), np.float32)
    x[:, 0], x[:, 1] = rng.integers(0, 20, n), rng.integers(0, 10, n)
    x[:, 2], x[:, 3] = rng.integers(0, 24, n), rng.integers(0, 5, n)
    x[:, 4:] = rng.random((n, len(VM_BASE_COLUMNS) - 4))
    return x


def _with_tiers(base: np.ndarray, tiers: np.ndarray) -> np.ndarray:
    return np.concatenate([base, tiers], axis=1).astype(np.float32)


def _base_vm() -> VerticalModel:
    torch.manual_seed(0)
    vm = VerticalModel(VMConfig(code_dim=CODE_DIM), USERS, ITEMS)
    for p in vm.parameters():
        torch.nn.init.normal_(p, std=0.3)
    return vm


def _fitted_base_vm(rate: float) -> VerticalModel:
    """A base VM as good as any on labels its inputs say nothing of: it scores about ``rate`` everywhere."""
    torch.manual_seed(0)
    vm = VerticalModel(VMConfig(code_dim=CODE_DIM), USERS, ITEMS)
    with torch.no_grad():
        vm.mlp[-1].weight.mul_(0.01)
    vm.start_at_base_rate(rate)
    return vm


def test_a_vm_started_from_the_base_scores_exactly_as_the_base_whatever_its_tiers_hold() -> None:
    rng = np.random.default_rng(0)
    base = _base_vm()
    x = _base_rows(rng, 500)
    width = len(SOLARIS.columns()) - len(VM_BASE_COLUMNS)
    started = from_base(base, SOLARIS)
    np.testing.assert_allclose(
        score(started, _with_tiers(x, rng.normal(size=(500, width)) * 5)), score(base, x), atol=1e-6
    )
    assert started.config.variant == "solaris" and base.config.variant == "base"


def test_an_input_that_only_misleads_is_left_alone_and_one_that_pays_is_used() -> None:
    rng = np.random.default_rng(1)
    base, width, n = _fitted_base_vm(0.3), len(SOLARIS.columns()) - len(VM_BASE_COLUMNS), 4000
    y_train, y_valid = (rng.random(n) < 0.3).astype(np.float32), (rng.random(n) < 0.3).astype(np.float32)
    noise = rng.normal(size=(n, width)).astype(np.float32)
    leaking = noise.copy()
    leaking[:, 0] = y_train * 4  # in training the pair code's first value is the label; in validation it is noise
    x_train, x_valid = _with_tiers(_base_rows(rng, n), leaking), _with_tiers(_base_rows(rng, n), noise)
    fit = FitConfig(epochs=4, patience=4, lr=1e-2, progress=False, threads=1)

    def valid_loss(vm: VerticalModel) -> float:
        with torch.inference_mode():
            return float(vm_loss(vm, torch.as_tensor(x_valid), torch.as_tensor(y_valid)))

    start = from_base(base, SOLARIS)
    kept, result = refresh_vm(start, (x_train, y_train), (x_valid, y_valid), fit, "kept", keep_start=True)
    moved, _ = refresh_vm(start, (x_train, y_train), (x_valid, y_valid), fit, "moved", keep_start=False)
    assert valid_loss(kept) <= valid_loss(start) + 1e-6  # never worse than the base VM on the validation hours
    assert valid_loss(moved) > valid_loss(start) + 1e-3  # what training alone does with a misleading tier

    x_valid_paying = x_valid.copy()
    x_valid_paying[:, len(VM_BASE_COLUMNS)] = y_valid * 4  # the same input, paying on the validation hours too
    used, result = refresh_vm(start, (x_train, y_train), (x_valid_paying, y_valid), fit, "used", keep_start=True)
    assert result.best_epoch >= 0 and result.best_valid_loss < result.start_loss - 0.1


def _examples(rng: np.random.Generator, pair: np.ndarray, click: np.ndarray) -> VMData:
    n = len(click)
    return VMData(
        base=_base_rows(rng, n),
        labels=np.stack([click, np.zeros(n, np.float32)], axis=1),
        fm_probs=np.full((n, 2), 0.3, np.float32),
        position=np.zeros(n, np.int64),
        pair=pair,
        agg=pair,
        agg_flag=np.zeros(n, np.float32),
        embedding_version="fm1-ae1-d4",
        pair_served=pair,
        head=0,
    )


def test_training_keeps_the_better_of_a_fresh_start_and_the_base_on_the_validation_hours() -> None:
    """Production's rule: a variant trained from scratch and from the base VM, the one better on validation kept.
    A pair code that misleads leaves the base VM's scores; one that pays is learned."""
    rng = np.random.default_rng(2)
    n, base = 3000, _fitted_base_vm(0.3)
    y_train, y_valid = (rng.random(n) < 0.3).astype(np.float32), (rng.random(n) < 0.3).astype(np.float32)
    leaking = rng.normal(size=(n, CODE_DIM)).astype(np.float32)
    leaking[:, 0] = y_train * 4  # the label in training, noise in validation
    train = _examples(rng, leaking, y_train)
    fit = FitConfig(epochs=3, patience=3, lr=1e-2, progress=False, threads=1)

    def base_loss(valid: VMData) -> float:
        x = torch.as_tensor(valid.base)
        with torch.inference_mode():
            return float(vm_loss(base, x, torch.as_tensor(valid.label)))

    solaris = replace(SOLARIS, embedding_version="fm1-ae1-d4")
    misleading = _examples(rng, rng.normal(size=(n, CODE_DIM)).astype(np.float32), y_valid)
    _, kept = train_vm(train, misleading, USERS, ITEMS, solaris, fit, base=base)
    _, fresh = train_vm(train, misleading, USERS, ITEMS, solaris, fit)
    assert fresh.best_valid_loss > base_loss(misleading) + 1e-3  # from scratch alone, the tier costs NE
    assert kept.start_loss is not None and kept.best_valid_loss <= base_loss(misleading) + 1e-6

    paying = misleading.pair.copy()
    paying[:, 0] = y_valid * 4
    _, used = train_vm(train, _examples(rng, paying, y_valid), USERS, ITEMS, solaris, fit, base=base)
    assert used.best_valid_loss < base_loss(misleading) - 0.1
