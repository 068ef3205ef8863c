"""The autoencoder that compresses the FM's interaction embedding into the compact code the VM and the store use.

Inputs are centred and divided by one overall scale (the root mean variance of the training embeddings, held
as buffers): per-dimension scaling would blow up dimensions that are nearly constant in training but move
later. The reconstruction error is then the share of the embedding's variance the code does not explain.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass

import numpy as np
import torch
from torch import nn

from solaris.models.layers import mlp


@dataclass(frozen=True)
class AEConfig:
    input_dim: int = 256
    code_dim: int = 32
    hidden: int = 128
    fm_version: str = ""  # the registered FM version whose embeddings this AE compresses

    def columns(self) -> tuple[str, ...]:
        return tuple(f"e_{j}" for j in range(self.input_dim))

    def as_params(self) -> dict[str, object]:
        return asdict(self)


class Autoencoder(nn.Module):
    def __init__(self, config: AEConfig, sample: np.ndarray) -> None:
        super().__init__()
        if sample.ndim != 2 or sample.shape[1] != config.input_dim:
            raise ValueError(f"autoencoder expects embeddings of width {config.input_dim}, got shape {sample.shape}")
        self.config = config
        scale = float(np.sqrt(sample.var(axis=0).mean()))
        self.register_buffer("mean", torch.as_tensor(sample.mean(axis=0), dtype=torch.float32))
        self.register_buffer("scale", torch.tensor(scale if scale > 1e-8 else 1.0, dtype=torch.float32))
        self.encoder = mlp([config.input_dim, config.hidden, config.code_dim], final_activation=False)
        self.decoder = mlp([config.code_dim, config.hidden, config.input_dim], final_activation=False)

    def standardise(self, x: torch.Tensor) -> torch.Tensor:
        return (x - self.mean) / self.scale

    def encode(self, x: torch.Tensor) -> torch.Tensor:
        return self.encoder(self.standardise(x))

    def reconstruction_error(self, x: torch.Tensor) -> torch.Tensor:
        """Per-row squared error over the mean variance (1.0 = no better than the mean embedding)."""
        z = self.standardise(x)
        return ((self.decoder(self.encoder(z)) - z) ** 2).mean(dim=1)

    def forward(self, x: torch.Tensor) -> torch.Tensor:
        return self.encode(x)


def compress(model: Autoencoder, embeddings: np.ndarray, batch_size: int = 65536) -> np.ndarray:
    """Codes for a batch of FM embeddings, on the CPU (the AE is tiny; moving data would cost more)."""
    if embeddings.ndim != 2 or embeddings.shape[1] != model.config.input_dim:
        raise ValueError(
            f"autoencoder expects embeddings of width {model.config.input_dim}, got shape {embeddings.shape}"
        )
    model = model.cpu().eval()
    with torch.inference_mode():
        codes = [
            model.encode(torch.as_tensor(embeddings[s : s + batch_size], dtype=torch.float32)).numpy()
            for s in range(0, embeddings.shape[0], batch_size)
        ]
    return np.concatenate(codes) if codes else np.zeros((0, model.config.code_dim), np.float32)
