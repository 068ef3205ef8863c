"""Offline metrics every model comparison uses, in plain numpy so tests can check them by hand.

NE divides log loss by the entropy of the observed positive rate on the same events, so it is comparable
across hours with different base rates; the transfer ratio is defined on NE (see PAPER.md).
"""

from __future__ import annotations

import numpy as np

EPS = 1e-7


def _checked(labels: np.ndarray, probs: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    y = np.asarray(labels, dtype=np.float64).ravel()
    p = np.asarray(probs, dtype=np.float64).ravel()
    if y.shape != p.shape:
        raise ValueError(f"labels ({y.size}) and probabilities ({p.size}) differ in length")
    if y.size == 0:
        raise ValueError("metrics need at least one event")
    if np.any((y < 0) | (y > 1)) or np.any((p < 0) | (p > 1)) or np.isnan(p).any():
        raise ValueError("labels and probabilities must lie in [0, 1]")
    return y, p


def log_loss(labels: np.ndarray, probs: np.ndarray) -> float:
    y, p = _checked(labels, probs)
    p = np.clip(p, EPS, 1 - EPS)
    return float(-np.mean(y * np.log(p) + (1 - y) * np.log(1 - p)))


def normalized_entropy(labels: np.ndarray, probs: np.ndarray) -> float:
    """Log loss over the log loss of always predicting the observed base rate (1.0 = no better than that)."""
    y, p = _checked(labels, probs)
    rate = float(np.clip(y.mean(), EPS, 1 - EPS))
    if rate <= EPS or rate >= 1 - EPS:
        raise ValueError("NE is undefined when every label is the same")
    entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))
    return float(log_loss(y, p) / entropy)


def auc(labels: np.ndarray, probs: np.ndarray) -> float:
    """ROC AUC by the rank-sum formula, with tied scores sharing their average rank."""
    y, p = _checked(labels, probs)
    pos = y > 0.5
    n_pos, n_neg = int(pos.sum()), int((~pos).sum())
    if n_pos == 0 or n_neg == 0:
        raise ValueError("AUC needs both positive and negative labels")
    order = np.argsort(p, kind="mergesort")
    sorted_p = p[order]
    ranks = np.empty(p.size, dtype=np.float64)
    _, first, counts = np.unique(sorted_p, return_index=True, return_counts=True)
    average = first + (counts + 1) / 2.0
    ranks[order] = np.repeat(average, counts)
    return float((ranks[pos].sum() - n_pos * (n_pos + 1) / 2.0) / (n_pos * n_neg))


def calibration(labels: np.ndarray, probs: np.ndarray) -> float:
    """Mean predicted over observed rate: 1.0 is calibrated on average, above 1 over-predicts."""
    y, p = _checked(labels, probs)
    if y.sum() == 0:
        raise ValueError("calibration is undefined without positive labels")
    return float(p.mean() / y.mean())


def transfer_ratio(ne_base: float, ne_variant: float, ne_fm: float) -> float:
    """Share of the FM's NE gain over the base VM that a VM variant captures."""
    gap = ne_base - ne_fm
    if gap <= 0:
        raise ValueError(f"transfer ratio undefined: FM NE {ne_fm:.5f} does not beat base VM NE {ne_base:.5f}")
    return (ne_base - ne_variant) / gap


def summary(labels: np.ndarray, probs: np.ndarray) -> dict[str, float]:
    return {
        "log_loss": log_loss(labels, probs),
        "ne": normalized_entropy(labels, probs),
        "auc": auc(labels, probs),
        "calibration": calibration(labels, probs),
    }
