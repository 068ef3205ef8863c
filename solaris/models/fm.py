"""The foundation model: multi-task (click, conversion) over ids, side features and the recent history.

Each history slot carries the past item (id + side features), its outcome, the time gap, and whether it
matches the target item or its side features (the signals behind fatigue and category momentum). Slots are
pooled three ways: target-aware attention, a mean, and an id-free sum of match evidence that generalises
from little data. The last shared layer is the user-item interaction embedding that SOLARIS
transfers. Position enters only as a bias on the heads, so the embedding does not depend on the slot a pair
is shown in: the precompute embeds pairs before anyone knows their position.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from solaris import exposure
from solaris.models.features import BASE_COLUMNS, IdTable, history_columns
from solaris.models.layers import SideEmbedding, base_logit, mlp, resolve_device, shrink_embeddings
from solaris.vms import LABELS

TASKS = LABELS  # the heads: what a VM may predict and distil


@dataclass(frozen=True)
class FMConfig:
    history: int = 32
    id_dim: int = 32
    heads: int = 2
    hidden: int = 512
    embedding_dim: int = 256
    max_position: int = 64
    # With the plan's weight decay: what let the FM train past its first epochs (ablations/fm_fit.py).
    dropout: float = 0.3
    # Share of user and item ids hidden in training: what trains the unknown row every new user and item takes
    # (layers.SideEmbedding). 0.1 beat none and a hiding of rare ids alone on the plain world, MovieLens and
    # the default world, most on new users (ablations/fm_new_ids.py).
    id_dropout: float = 0.1

    def columns(self) -> tuple[str, ...]:
        return BASE_COLUMNS + exposure.columns() + history_columns(self.history)

    def as_params(self) -> dict[str, float]:
        return asdict(self)


class FoundationModel(nn.Module):
    def __init__(self, config: FMConfig, users: IdTable, items: IdTable) -> None:
        super().__init__()
        self.config = config
        d = config.id_dim
        self.user = SideEmbedding(users, d, config.id_dropout)
        self.item = SideEmbedding(items, d, config.id_dropout)
        self.hour = nn.Embedding(24, d)
        self.outcome = nn.Embedding(4, d)
        self.gap = nn.Linear(1, d)
        self.exposure = nn.Linear(len(exposure.columns()), d)
        self.match = nn.Linear(1 + len(items.names), d)
        self.evidence = mlp([1 + len(items.names) + 3, d, d], final_activation=True)
        self.slot = nn.Sequential(nn.ReLU(), nn.Linear(d, d))
        self.query = nn.Linear(3 * d, config.heads * d)
        width = 7 * d + config.heads * d + 1
        self.dropout = nn.Dropout(config.dropout)
        self.interaction = mlp([width, config.hidden, config.embedding_dim], final_activation=True)
        self.heads = nn.Linear(config.embedding_dim, len(TASKS))
        self.position_bias = nn.Embedding(config.max_position, len(TASKS))
        shrink_embeddings(self)

    def outputs(self, x: torch.Tensor, new_users: bool = False) -> tuple[torch.Tensor, torch.Tensor]:
        """(interaction embedding, logits per task) for a packed input matrix; ``new_users``: every user id
        as one the FM never trained on (its unknown row, the user's side features), as for a new user."""
        n, h, d = x.shape[0], self.config.history, self.config.id_dim
        user_rows, item_rows = self.user.rows(x[:, 0]), self.item.rows(x[:, 1])
        hour = self.hour(x[:, 2].long().clamp(0, 23))
        u, i = self.user(user_rows, as_unknown=new_users), self.item(item_rows)

        n_base, n_counts = len(BASE_COLUMNS), len(exposure.columns())
        counts = self.exposure(x[:, n_base : n_base + n_counts])
        hist = x[:, n_base + n_counts :].reshape(n, 4, h)
        h_item, h_click, h_conv, h_gap = hist[:, 0], hist[:, 1], hist[:, 2], hist[:, 3]
        mask = h_item >= 0
        h_rows = torch.where(mask, self.item.rows(h_item), torch.zeros_like(h_item, dtype=torch.long))
        same = torch.cat(
            [
                (h_rows == item_rows[:, None]).unsqueeze(-1),
                self.item.features[h_rows] == self.item.features[item_rows][:, None, :],
            ],
            dim=-1,
        ) & mask.unsqueeze(-1)
        outcome = (h_click + 2 * h_conv).long().clamp(0, 3)
        slots = self.slot(
            self.item(h_rows) + self.outcome(outcome) + self.gap(h_gap.unsqueeze(-1)) + self.match(same.float())
        ) * mask.unsqueeze(-1)

        # Summed, not averaged: fatigue and momentum grow with the number of matching past impressions.
        evidence = self.evidence(torch.cat([same.float(), hist[:, 1:].transpose(1, 2)], dim=-1))
        evidence = (evidence * mask.unsqueeze(-1)).sum(dim=1)

        q = self.query(torch.cat([i, u, hour], dim=-1)).reshape(n, self.config.heads, d)
        scores = torch.einsum("nhd,nsd->nhs", q, slots) / d**0.5
        scores = scores.masked_fill(~mask[:, None, :], -1e4)
        weights = torch.softmax(scores, dim=-1) * mask[:, None, :]
        attended = torch.einsum("nhs,nsd->nhd", weights, slots).reshape(n, -1)
        count = mask.sum(dim=1, keepdim=True).float()
        mean = slots.sum(dim=1) / count.clamp(min=1)

        features = torch.cat([u, i, u * i, hour, counts, attended, mean, evidence, torch.log1p(count)], dim=-1)
        embedding = self.interaction(self.dropout(features))
        position = x[:, 3].long().clamp(0, self.config.max_position - 1)
        logits = self.heads(embedding) + self.position_bias(position)
        return embedding, logits

    def start_at_base_rates(self, rates: np.ndarray) -> None:
        """Start the heads at the observed rates: rare positives otherwise cost epochs of bias-fitting."""
        with torch.no_grad():
            self.heads.bias.copy_(torch.as_tensor(base_logit(rates), dtype=torch.float32))

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        """Probabilities per task (n, 2): what MLflow's pyfunc serves."""
        return torch.sigmoid(self.outputs(x)[1])


@dataclass(frozen=True)
class Embedded:
    embedding: np.ndarray  # (n, embedding_dim) float32
    probs: np.ndarray  # (n, 2) float32: click, conversion


def embed(
    model: FoundationModel, matrix: np.ndarray, batch_size: int = 8192, device: str = "auto", new_users: bool = False
) -> Embedded:
    """Embed pairs in batches: CUDA with bf16 autocast when present, CPU fp32 otherwise, same code path
    (``new_users``: see :meth:`FoundationModel.outputs`)."""
    dev = resolve_device(device)
    model = model.to(dev).eval()
    embeddings, probs = [], []
    with torch.inference_mode(), torch.autocast(dev.type, dtype=torch.bfloat16, enabled=dev.type == "cuda"):
        for start in range(0, matrix.shape[0], batch_size):
            x = torch.as_tensor(matrix[start : start + batch_size], dtype=torch.float32, device=dev)
            emb, logits = model.outputs(x, new_users)
            embeddings.append(emb.float().cpu().numpy())
            probs.append(torch.sigmoid(logits.float()).cpu().numpy())
    dim = model.config.embedding_dim
    return Embedded(
        embedding=np.concatenate(embeddings) if embeddings else np.zeros((0, dim), np.float32),
        probs=np.concatenate(probs) if probs else np.zeros((0, len(TASKS)), np.float32),
    )


def user_vectors(model: FoundationModel, user_ids: np.ndarray) -> np.ndarray:
    """The FM's user representation, its id embedding plus its side-feature embeddings: [n, id_dim] float32.

    The user KNN's vector: every user in the FM's table has one, history or not (a user who signed up but
    never requested too), and it is what the FM learnt the user's taste in; an id the FM does not know gets
    its learned 'unknown' row.
    """
    return _side_vectors(model.user, user_ids)


def item_vectors(model: FoundationModel, item_ids: np.ndarray) -> np.ndarray:
    """The FM's item representation (id + side-feature embeddings), [n, id_dim] float32: what the ad-to-ad
    tier finds similar items by; an unknown id gets the learned 'unknown' row, as for users."""
    return _side_vectors(model.item, item_ids)


def _side_vectors(embedding: SideEmbedding, ids: np.ndarray) -> np.ndarray:
    if embedding.training:  # it would drop ids at random and mark every id it reads as trained
        raise ValueError("the FM's vectors are read in eval mode: call .eval() first")
    rows = torch.as_tensor(np.asarray(ids, dtype=np.int64), device=embedding.ids.weight.device)
    with torch.inference_mode():
        return embedding(embedding.rows(rows)).float().cpu().numpy()
