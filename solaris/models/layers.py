"""Layers shared by the FM and the VMs."""

from __future__ import annotations

from collections.abc import Callable

import numpy as np
import torch
from torch import nn

from solaris.models.features import IdTable


class SideEmbedding(nn.Module):
    """An id embedding plus the sum of its side-feature embeddings, looked up from tables held as buffers.

    Holding the side-feature table inside the module makes a logged model self-contained: callers pass ids
    only. What a model knows of an id must not live only in an id row that training never reached (an item
    born after the model trained keeps its row at initialisation until the next retrain): an id no training
    step looked up takes the 'unknown' id row, with its own side features. That row is learned only from ids
    hidden in training, as a new id is hidden: ``id_dropout`` hides that share of ids in every training
    lookup. Without it no step reaches the row and weight decay zeroes it, and with no side features a new
    user's or item's vector is then exactly zero (ablations/fm_new_ids.py).
    """

    def __init__(self, table: IdTable, dim: int, id_dropout: float = 0.0) -> None:
        super().__init__()
        if not 0.0 <= id_dropout < 1.0:
            raise ValueError(f"id_dropout {id_dropout} must lie in [0, 1)")
        self.names = table.names  # not a tensor: saved in a model's spec (solaris.models.files)
        self.id_dropout = id_dropout
        cards = table.cardinalities
        self.register_buffer("features", torch.as_tensor(table.features, dtype=torch.long))
        # Which id rows a training step has looked up: saved with the weights, carried over by a fine-tune.
        self.register_buffer("trained", torch.zeros(table.vocab, dtype=torch.bool))
        offsets = np.concatenate([[0], np.cumsum(cards)[:-1]]) if cards else np.zeros(0)
        self.register_buffer("offsets", torch.as_tensor(offsets, dtype=torch.long))
        self.ids = nn.Embedding(table.vocab, dim)
        self.side = nn.Embedding(max(int(sum(cards)), 1), dim)

    @property
    def vocab(self) -> int:
        return self.ids.num_embeddings

    def rows(self, ids: torch.Tensor) -> torch.Tensor:
        ids = ids.long()
        return torch.where((ids >= 0) & (ids < self.vocab - 1), ids + 1, torch.zeros_like(ids))

    def known(self, ids: np.ndarray) -> np.ndarray:
        """Which ``ids`` a training step looked up (the rest take the unknown row): bool, one per id. An id
        outside the table is never known (row 0 is the unknown row, which empty history slots look up too)."""
        rows = self.rows(torch.as_tensor(np.asarray(ids, dtype=np.int64), device=self.trained.device))
        return ((rows > 0) & self.trained[rows]).cpu().numpy()

    def forward(self, rows: torch.Tensor, as_unknown: bool = False) -> torch.Tensor:
        """``as_unknown``: every id takes the unknown row, with its own side features (a user new to the model)."""
        if self.training:
            self.trained[rows] = True
        known = torch.zeros_like(rows, dtype=torch.bool) if as_unknown else self.trained[rows]
        if self.training and self.id_dropout > 0:
            known = known & (torch.rand(rows.shape, device=rows.device) >= self.id_dropout)
        out = self.ids(torch.where(known, rows, torch.zeros_like(rows)))
        if self.offsets.numel():
            out = out + self.side(self.features[rows] + self.offsets).sum(dim=-2)
        return out


def shrink_embeddings(module: nn.Module, std: float = 0.02) -> None:
    """Start every embedding near zero: torch's N(0, 1) default makes an untrained model's scores random and
    far from the base rate, which costs small datasets most of their training steps to undo."""
    for child in module.modules():
        if isinstance(child, nn.Embedding):
            nn.init.normal_(child.weight, std=std)


def mlp(sizes: list[int], final_activation: bool) -> nn.Sequential:
    layers: list[nn.Module] = []
    for i, (a, b) in enumerate(zip(sizes[:-1], sizes[1:], strict=False)):
        layers.append(nn.Linear(a, b))
        if i < len(sizes) - 2 or final_activation:
            layers.append(nn.ReLU())
    return nn.Sequential(*layers)


def resolve_device(name: str = "auto") -> torch.device:
    """``auto`` takes CUDA when present; asking for CUDA without one is an error, not a silent fallback."""
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise ValueError("device 'cuda' requested but torch sees no CUDA device")
    if name not in ("cpu", "cuda"):
        raise ValueError(f"device {name!r} is not one of auto, cpu, cuda")
    return torch.device(name)


def base_logit(rates: np.ndarray | float) -> np.ndarray:
    rates = np.clip(np.asarray(rates, dtype=np.float64), 1e-4, 1 - 1e-4)
    return np.log(rates / (1 - rates))


def forward_in_blocks(
    forward: Callable[[torch.Tensor], torch.Tensor], matrix: np.ndarray, batch_size: int, fixed_rows: int | None
) -> np.ndarray:
    """``forward`` over the rows, ``batch_size`` at a time, or with ``fixed_rows`` exactly that many every call
    (the last padded with zeros, their outputs dropped). A GEMM's kernel, and so an output's last bits, can
    vary with the batch's shape; at one shape a row gets the same bits whichever rows share its batch, so a
    pool scored whole or split among user shards scores alike."""
    block = fixed_rows or batch_size
    out = []
    with torch.inference_mode():
        for start in range(0, len(matrix), block):
            part = np.asarray(matrix[start : start + block], np.float32)
            rows = len(part)
            if fixed_rows is not None and rows < block:
                part = np.concatenate([part, np.zeros((block - rows, *part.shape[1:]), np.float32)])
            out.append(forward(torch.as_tensor(part)).numpy()[:rows])
    return np.concatenate(out) if out else np.zeros(0, np.float32)
