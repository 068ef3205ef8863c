"""Model cost figures: parameters and FLOPs per scored pair, the numbers the FM-vs-VM trade-off is about."""

from __future__ import annotations

import numpy as np
import torch
from torch import nn
from torch.utils.flop_counter import FlopCounterMode


def parameter_count(model: nn.Module) -> int:
    return sum(p.numel() for p in model.parameters())


def flops_per_pair(model: nn.Module, example: np.ndarray) -> float:
    """Forward FLOPs per input row, counted by torch's FLOP counter (matmuls; lookups count as free)."""
    x = torch.as_tensor(example, dtype=torch.float32)
    counter = FlopCounterMode(display=False)
    with torch.inference_mode(), counter:
        model.eval()(x)
    return counter.get_total_flops() / x.shape[0]
