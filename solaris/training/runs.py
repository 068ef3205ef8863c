"""What every training run logs: parameters, per-epoch losses, the loss-curve PNG."""

from __future__ import annotations

from collections.abc import Mapping

from matplotlib.figure import Figure

import mlflow
from solaris.models.training import FitResult


def log_params(params: Mapping[str, object]) -> None:
    mlflow.log_params({k: str(v) for k, v in params.items()})


def log_epoch(epoch: int, train: float, valid: float) -> None:
    """Per-epoch losses, logged as they happen so a long run can be watched in the MLflow UI."""
    mlflow.log_metrics({"train_loss": train, "valid_loss": valid}, step=epoch)


def log_fit(result: FitResult, title: str) -> None:
    mlflow.log_metrics({"best_epoch": result.best_epoch, "train_seconds": result.seconds})
    fig = Figure(figsize=(5, 3.2))
    ax = fig.subplots()
    epochs = range(1, len(result.train_loss) + 1)
    ax.plot(epochs, result.train_loss, marker="o", label="train")
    ax.plot(epochs, result.valid_loss, marker="o", label="validation")
    ax.axvline(result.best_epoch + 1, color="grey", linestyle=":", label="kept")
    ax.set(xlabel="epoch", ylabel="loss", title=title)
    ax.legend()
    fig.tight_layout()
    mlflow.log_figure(fig, "loss_curve.png")
