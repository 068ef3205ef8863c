"""The VM's serving forward in numpy: the same scores as :class:`~solaris.models.vm.VerticalModel` in eval mode,
without torch's per-operation dispatch, which costs more than the arithmetic at a request's 200 rows.

Each id's embedding in eval mode depends on the id alone (its own row where training looked it up, else the
unknown row, plus its side features), so every row's vector is computed once, with the model's own torch code,
when the model is loaded: a request gathers rows and runs the MLP's few matrix products.
"""

from __future__ import annotations

import numpy as np
import torch
from torch import nn

from solaris.models.features import BASE_COLUMNS
from solaris.models.layers import SideEmbedding
from solaris.models.vm import VerticalModel


def _id_vectors(embedding: SideEmbedding) -> np.ndarray:
    """Row r's eval-mode vector for every row of the table (row 0: the unknown id)."""
    with torch.inference_mode():
        return embedding(torch.arange(embedding.vocab)).numpy().astype(np.float32)


def _rows(ids: np.ndarray, vocab: int) -> np.ndarray:
    """:meth:`SideEmbedding.rows` on the float ids of an input matrix: id + 1, or 0 for an id outside it."""
    ids = ids.astype(np.int64)  # truncates toward zero, as torch's ``.long()``
    return np.where((ids >= 0) & (ids < vocab - 1), ids + 1, 0)


class NumpyVM:
    """``vm``'s probabilities for an input matrix, as ``vm(torch.from_numpy(x))`` in eval mode gives them."""

    def __init__(self, vm: VerticalModel) -> None:
        if vm.training:
            raise ValueError("a VM serves in eval mode: call .eval() first (training mode drops ids)")
        self.user, self.item = _id_vectors(vm.user), _id_vectors(vm.item)
        self.hour = vm.hour.weight.detach().numpy().copy()
        self.position = vm.position.weight.detach().numpy().copy()
        linears = [layer for layer in vm.mlp if isinstance(layer, nn.Linear)]
        if [type(layer) for layer in vm.mlp] != [nn.Linear, nn.ReLU] * (len(linears) - 1) + [nn.Linear]:
            raise ValueError("the VM's MLP is not Linear layers with a ReLU between each two")
        self.layers = [(lin.weight.detach().numpy().T.copy(), lin.bias.detach().numpy().copy()) for lin in linears]

    def __call__(self, x: np.ndarray) -> np.ndarray:
        x = np.asarray(x, np.float32)
        h = np.concatenate(
            [
                self.user[_rows(x[:, 0], len(self.user))],
                self.item[_rows(x[:, 1], len(self.item))],
                self.hour[np.clip(x[:, 2].astype(np.int64), 0, len(self.hour) - 1)],
                self.position[np.clip(x[:, 3].astype(np.int64), 0, len(self.position) - 1)],
                x[:, len(BASE_COLUMNS) :],
            ],
            axis=1,
        )
        for k, (weight, bias) in enumerate(self.layers):
            h = h @ weight + bias
            if k < len(self.layers) - 1:
                np.maximum(h, 0.0, out=h)
        return (1.0 / (1.0 + np.exp(-h[:, 0]))).astype(np.float32)
