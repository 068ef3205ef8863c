"""The demand model: P(a candidate pair is requested while its embedding would be fresh), from
:mod:`solaris.precompute.demand_features`, and what a pair code is worth per fallback (the lower tier the user has without it).

A small MLP in torch rather than a gradient-boosted trees package: the features are a handful of smooth
log-counts, where an MLP matches boosted trees' AUC (measured in the training job's log), and a torch
module rides on what every other SOLARIS model already has: safetensors files with no pickle, the
pyfunc wrapper in the registry, CUDA when present, one dependency fewer.

Training keeps every positive and a sample of the negatives; ``logit_offset`` (log of the negatives'
sampling rate) turns the sampled odds back into the population's, so probabilities stay comparable across
fallbacks when they are multiplied by each fallback's gain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from solaris.models.layers import forward_in_blocks, mlp

# The lower tiers a pair code would replace: with a user aggregate, the pair code refines it; without one,
# the pair code is all the FM gives (the neighbours' code is the only other tier). Keys of ``gains``.
FALLBACKS = ("aggregate", "no_aggregate")


@dataclass(frozen=True)
class DemandConfig:
    features: tuple[str, ...]  # the names of its input columns (solaris.precompute.demand_features.NAMES)
    hidden: tuple[int, ...] = (64, 32)
    ttl_hours: int = 4  # the label's window: requested within this many hours of the run
    logit_offset: float = 0.0
    # Expected NE gain of a pair code over the lower tiers, per fallback (see FALLBACKS); equal gains rank by
    # demand alone.
    gain_aggregate: float = 1.0
    gain_no_aggregate: float = 1.0

    def columns(self) -> tuple[str, ...]:
        return self.features

    def as_params(self) -> dict[str, object]:
        return {**asdict(self), "features": len(self.features), "hidden": ",".join(map(str, self.hidden))}

    def gain(self, has_aggregate: np.ndarray) -> np.ndarray:
        return np.where(has_aggregate, self.gain_aggregate, self.gain_no_aggregate)


class DemandModel(nn.Module):
    """``forward`` gives probabilities (what the registry's pyfunc serves); training uses :meth:`logits`."""

    def __init__(self, config: DemandConfig, sample: np.ndarray) -> None:
        super().__init__()
        if sample.ndim != 2 or sample.shape[1] != len(config.features):
            raise ValueError(f"demand model expects {len(config.features)} features, got shape {sample.shape}")
        self.config = config
        std = sample.std(axis=0)
        self.register_buffer("mean", torch.as_tensor(sample.mean(axis=0), dtype=torch.float32))
        self.register_buffer("scale", torch.as_tensor(np.where(std > 1e-6, std, 1.0), dtype=torch.float32))
        self.net = mlp([len(config.features), *config.hidden, 1], final_activation=False)

    def logits(self, x: torch.Tensor) -> torch.Tensor:
        return self.net((x - self.mean) / self.scale).squeeze(-1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return torch.sigmoid(self.logits(x) + self.config.logit_offset)


def predict(
    model: DemandModel, features: np.ndarray, batch_size: int = 262_144, fixed_rows: int | None = None
) -> np.ndarray:
    """P(requested while fresh) for each row, on the CPU (a few thousand FLOPs a row: moving data to a GPU
    would cost more than the forward); with ``fixed_rows``, each row's alone (:func:`.layers.forward_in_blocks`)."""
    if features.ndim != 2 or features.shape[1] != len(model.config.features):
        raise ValueError(f"demand model expects {len(model.config.features)} features, got shape {features.shape}")
    model = model.cpu().eval()
    return forward_in_blocks(model, features, batch_size, fixed_rows).astype(np.float64)
