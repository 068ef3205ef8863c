"""The VM input matrix as the ranker builds it: absent tiers zeroed, flags kept, versions enforced."""

from __future__ import annotations

import numpy as np
import pytest

from solaris.models.vm import VMConfig
from solaris.models.vm_data import VMData, vm_inputs
from solaris.embedding_version import VersionMismatch

CONFIG = VMConfig(variant="solaris", code_dim=2, embedding_version="fm3-ae4-d2")
BASE = np.array([[1, 2, 3, 0], [4, 5, 6, 1]], np.float32)


def tiers(flags: list[float]) -> dict[str, tuple[np.ndarray, np.ndarray]]:
    codes = np.array([[0.5, -1.0], [2.0, 3.0]], np.float32)
    return {tier: (codes + k, np.array(flags, np.float32)) for k, tier in enumerate(("pair", "agg", "knn"))}


def test_absent_codes_are_zeroed_and_flagged() -> None:
    x = vm_inputs(CONFIG, "fm3-ae4-d2", BASE, tiers([1.0, 0.0]))
    assert x.shape == (2, len(CONFIG.columns()))
    np.testing.assert_array_equal(x[:, :4], BASE)
    np.testing.assert_array_equal(x[0, 4:7], [0.5, -1.0, 1.0])  # pair present
    np.testing.assert_array_equal(x[1, 4:7], [0.0, 0.0, 0.0])  # pair absent: zeros, flag 0
    np.testing.assert_array_equal(x[0, 10:13], [2.5, 1.0, 1.0])  # knn tier = codes + 2


def test_embeddings_of_another_version_are_refused() -> None:
    message = "expects embedding version fm3-ae4-d2, got embeddings of version fm3-ae5-d2"
    with pytest.raises(VersionMismatch, match=message):
        vm_inputs(CONFIG, "fm3-ae5-d2", BASE, tiers([1.0, 1.0]))


def test_base_variant_ignores_embeddings() -> None:
    np.testing.assert_array_equal(vm_inputs(VMConfig(), "anything", BASE, {}), BASE)


def test_knn_hook_replaces_the_tier_and_checks_its_shape() -> None:
    zeros = np.zeros((2, 2), np.float32)
    data = VMData(BASE, np.zeros(2), np.zeros(2), zeros, zeros, np.zeros(2), zeros, np.zeros(2), "fm3-ae4-d2")
    served = data.with_knn(np.ones((2, 2)), np.array([1, 0]))
    np.testing.assert_array_equal(served.matrix(CONFIG)[:, -3:], [[1, 1, 1], [0, 0, 0]])
    with pytest.raises(ValueError, match="do not match"):
        data.with_knn(np.ones((3, 2)), np.ones(3))
