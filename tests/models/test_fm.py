"""FM and VM behaviour that needs no training: batching, position independence, version-checked inputs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import pyarrow as pa
import pytest
import torch
from id_tables import small_id_tables

from solaris.models.cost import flops_per_pair, parameter_count
from solaris.models.features import VM_BASE_COLUMNS, HistoryIndex, IdTable, fm_matrix
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.vm import VerticalModel, VMConfig, score


@pytest.fixture(scope="module")
def setup(make_impressions: Callable[..., pa.Table]) -> tuple[FoundationModel, np.ndarray, IdTable, IdTable]:
    torch.manual_seed(0)
    table = make_impressions(np.random.default_rng(1), 300)
    table = table.append_column("position", pa.array(np.arange(300) % 8, pa.int16()))
    users, items = small_id_tables()
    fm = FoundationModel(FMConfig(history=8, hidden=64, embedding_dim=32), users, items)
    return fm, fm_matrix(table, HistoryIndex.from_table(table), 8), users, items


def test_embed_is_batch_size_invariant_and_matches_forward(setup: tuple) -> None:
    fm, x, _, _ = setup
    small, large = embed(fm, x, batch_size=7, device="cpu"), embed(fm, x, batch_size=1000, device="cpu")
    assert small.embedding.shape == (len(x), 32)
    np.testing.assert_allclose(small.embedding, large.embedding, rtol=1e-5, atol=1e-6)
    with torch.inference_mode():
        np.testing.assert_allclose(fm(torch.as_tensor(x)).numpy(), large.probs, rtol=1e-5, atol=1e-6)


def test_embedding_does_not_depend_on_position_but_scores_do(setup: tuple) -> None:
    fm, x, _, _ = setup
    moved = x.copy()
    moved[:, 3] = (moved[:, 3] + 3) % 8
    torch.nn.init.normal_(fm.position_bias.weight)
    a, b = embed(fm, x, device="cpu"), embed(fm, moved, device="cpu")
    np.testing.assert_allclose(a.embedding, b.embedding, rtol=1e-6)
    assert not np.allclose(a.probs, b.probs)


def test_cuda_request_without_a_gpu_is_an_error_not_a_fallback(setup: tuple) -> None:
    if torch.cuda.is_available():
        pytest.skip("this machine has CUDA")
    with pytest.raises(ValueError, match="no CUDA device"):
        embed(setup[0], setup[1], device="cuda")


def test_fm_costs_more_than_a_vm(setup: tuple) -> None:
    fm, x, users, items = setup
    vm = VerticalModel(VMConfig(variant="base"), users, items)
    assert parameter_count(fm) > parameter_count(vm)
    assert flops_per_pair(fm, x[:16]) > flops_per_pair(
        vm, x[:16, : len(VM_BASE_COLUMNS)]
    )  # ids and counters, as the FM


def test_vm_refuses_a_matrix_of_the_wrong_width(setup: tuple) -> None:
    _, x, users, items = setup
    vm = VerticalModel(VMConfig(variant="solaris"), users, items)
    with pytest.raises(ValueError, match="expects 142 input columns"):
        score(vm, x[:, :4])


def test_unknown_variant_is_refused() -> None:
    with pytest.raises(ValueError, match="'teacher' is not one of base"):
        VMConfig(variant="teacher")
