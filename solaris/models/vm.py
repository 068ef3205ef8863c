"""The vertical models: small, fast click models (a few id embeddings and an MLP).

``base`` and ``distilled`` see ids, side features, hour, position and the exposure counters a production
ranker has (the user's and the pair's impressions over 6/24/72 hours, log1p, as of the hour's start: what
the store serves). ``solaris`` and ``solaris_distilled``
also see four embedding tiers — the pair code, the user's 24-hour aggregate code, the neighbours' (KNN)
code and the user's codes for similar items (A2A) — each followed by a presence flag, with zeros when
absent, so one model serves every coverage tier.
Distillation changes only the training target, never the inputs.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from solaris.models.features import BASE_COLUMNS, TIERS, VM_BASE_COLUMNS, IdTable
from solaris.models.layers import SideEmbedding, base_logit, forward_in_blocks, mlp, shrink_embeddings

BASE_VARIANT = "base"  # the VM without FM inputs: every other variant starts from it (from_base)
VARIANTS = (BASE_VARIANT, "distilled", "solaris", "solaris_distilled")


@dataclass(frozen=True)
class VMConfig:
    variant: str = BASE_VARIANT
    code_dim: int = 32
    id_dim: int = 16
    context_dim: int = 8
    hidden: tuple[int, ...] = (64, 32)
    max_position: int = 64
    distill_alpha: float = 0.5  # target = (1 - alpha) * label + alpha * FM probability
    coverage: float = 0.5  # share of training pairs that keep their pair code (the rest: zeros, flag 0)
    id_dropout: float = 0.1  # trains the unknown id row a new user or item takes (layers.SideEmbedding)
    embedding_version: str = ""  # set from the training data: the only embeddings this VM may be fed

    def __post_init__(self) -> None:
        if self.variant not in VARIANTS:
            raise ValueError(f"VM variant {self.variant!r} is not one of {', '.join(VARIANTS)}")
        if not 0.0 <= self.distill_alpha <= 1.0 or not 0.0 <= self.coverage <= 1.0:
            raise ValueError("distill_alpha and coverage must lie in [0, 1]")

    @property
    def uses_embeddings(self) -> bool:
        return self.variant.startswith("solaris")

    @property
    def distills(self) -> bool:
        return self.variant.endswith("distilled")

    def columns(self) -> tuple[str, ...]:
        if not self.uses_embeddings:
            return VM_BASE_COLUMNS
        tiers = tuple(
            name for tier in TIERS for name in (*(f"{tier}_{j}" for j in range(self.code_dim)), f"{tier}_flag")
        )
        return VM_BASE_COLUMNS + tiers

    def as_params(self) -> dict[str, object]:
        return {**asdict(self), "hidden": ",".join(map(str, self.hidden))}


def tier_columns(code_dim: int, tier: str) -> slice:
    """The columns of ``tier``'s code and flag in a SOLARIS VM's input rows."""
    start = len(VM_BASE_COLUMNS) + TIERS.index(tier) * (code_dim + 1)
    return slice(start, start + code_dim + 1)


class VerticalModel(nn.Module):
    def __init__(self, config: VMConfig, users: IdTable, items: IdTable) -> None:
        super().__init__()
        self.config = config
        self.user = SideEmbedding(users, config.id_dim, config.id_dropout)
        self.item = SideEmbedding(items, config.id_dim, config.id_dropout)
        self.hour = nn.Embedding(24, config.context_dim)
        self.position = nn.Embedding(config.max_position, config.context_dim)
        extra = len(config.columns()) - len(BASE_COLUMNS)  # counters, then the tiers
        width = 2 * config.id_dim + 2 * config.context_dim + extra
        self.mlp = mlp([width, *config.hidden, 1], final_activation=False)
        shrink_embeddings(self)

    def start_at_base_rate(self, rate: float) -> None:
        """Start the output at the observed rate: rare positives otherwise cost epochs of bias-fitting."""
        with torch.no_grad():
            self.mlp[-1].bias.fill_(float(base_logit(rate)))

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        parts = [
            self.user(self.user.rows(x[:, 0])),
            self.item(self.item.rows(x[:, 1])),
            self.hour(x[:, 2].long().clamp(0, 23)),
            self.position(x[:, 3].long().clamp(0, self.config.max_position - 1)),
        ]
        parts.append(x[:, len(BASE_COLUMNS) :])
        return self.mlp(torch.cat(parts, dim=-1)).squeeze(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Click probability per row: what MLflow's pyfunc and the ranker serve."""
        return torch.sigmoid(self.logits(x))


def from_base(base: VerticalModel, config: VMConfig) -> VerticalModel:
    """A VM of ``config`` that scores exactly as ``base`` does: its weights copied, the inputs ``base`` lacks
    (the embedding tiers) at zero weight. Training it further can only move away from the base VM as far as
    those inputs pay on the training rows, and early stopping that keeps the start never ends worse than the
    base VM on the validation hours: a tier the VM cannot use costs nothing."""
    if base.config.uses_embeddings:
        raise ValueError(f"from_base starts from a VM without embedding inputs, not variant {base.config.variant!r}")
    model = VerticalModel(config, _ids_of(base.user), _ids_of(base.item))
    state = base.state_dict()
    first = state["mlp.0.weight"]
    widened = torch.zeros_like(model.mlp[0].weight)
    widened[:, : first.shape[1]] = first
    model.load_state_dict(state | {"mlp.0.weight": widened})
    return model


def _ids_of(embedding: SideEmbedding) -> IdTable:
    return IdTable(embedding.features.cpu().numpy(), embedding.names)


def score(
    model: VerticalModel, matrix: np.ndarray, batch_size: int = 65536, fixed_rows: int | None = None
) -> np.ndarray:
    """P(label) for each input row; with ``fixed_rows``, each row's alone (:func:`.layers.forward_in_blocks`)."""
    if matrix.ndim != 2 or matrix.shape[1] != len(model.config.columns()):
        raise ValueError(
            f"VM {model.config.variant} expects {len(model.config.columns())} input columns, got shape {matrix.shape}"
        )
    model = model.cpu().eval()
    return forward_in_blocks(model, matrix, batch_size, fixed_rows)
