"""The ranker scores with the VM's forward in numpy: the registered model's own scores within 1e-6, on every
kind of row a request brings (known, new and out-of-range ids, any hour and position, tiers present or not)."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from solaris.models.vm_numpy import NumpyVM
from solaris.serving.champion import ServingModel


def rows(model: ServingModel, n: int, seed: int) -> np.ndarray:
    rng = np.random.default_rng(seed)
    vm = model.vm
    x = rng.normal(size=(n, len(vm.config.columns()))).astype(np.float32)
    x[:, 0] = rng.integers(-2, vm.user.vocab + 5, n)  # the table's ids, ids past it, negative ones
    x[:, 1] = rng.integers(-2, vm.item.vocab + 5, n)
    x[:, 2] = rng.integers(-3, 30, n)  # hours and positions past their tables are clamped
    x[:, 3] = rng.integers(-3, vm.config.max_position + 10, n)
    x[rng.random(n) < 0.5, 4:] = 0.0  # half the rows with no tier at all
    return x


def test_the_numpy_forward_scores_as_the_registered_model(champion: ServingModel) -> None:
    x = rows(champion, 4000, seed=0)
    assert champion.vm.user.trained.any() and not champion.vm.user.trained.all()  # both id paths are taken
    with torch.inference_mode():
        expected = champion.vm(torch.from_numpy(x)).numpy()
    got = champion.scorer(x)
    assert got.dtype == np.float32 and got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=0, atol=1e-6)


def test_a_vm_in_training_mode_is_refused(champion: ServingModel) -> None:
    champion.vm.train()
    try:
        with pytest.raises(ValueError, match="eval mode"):
            NumpyVM(champion.vm)
    finally:
        champion.vm.eval()
