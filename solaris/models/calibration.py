"""Platt scaling of a click probability: ``sigmoid(a * logit(p) + b)`` fitted on recent labelled hours.

A teacher frozen at the end of its training span drifts out of calibration while the VMs it is compared
with are refreshed on recent hours; refitting these two numbers on the same recent hours (never on the hours
it is scored on) compares them at equal freshness without touching the FM or its embeddings.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solaris.models.layers import base_logit


@dataclass(frozen=True)
class PlattScaling:
    slope: float
    intercept: float

    @classmethod
    def fit(cls, probs: np.ndarray, labels: np.ndarray, iterations: int = 50) -> PlattScaling:
        """Logistic regression of the labels on the logit, by Newton's method (two parameters, convex)."""
        x = base_logit(probs)
        y = np.asarray(labels, np.float64)
        if len(x) != len(y) or not len(y) or y.min() == y.max():
            raise ValueError("Platt scaling needs labelled rows of both classes")
        design = np.stack([x, np.ones_like(x)], axis=1)

        def loss(w: np.ndarray) -> float:
            z = design @ w
            return float(np.mean(np.logaddexp(0, z) - y * z))

        w = np.array([0.0, float(base_logit(y.mean()))])  # the constant model: Newton is safe from there
        for _ in range(iterations):
            p = 1 / (1 + np.exp(-(design @ w)))
            gradient = design.T @ (p - y)
            hessian = (design * (p * (1 - p))[:, None]).T @ design + 1e-9 * np.eye(2)
            step = np.linalg.solve(hessian, gradient)
            shrink = 1.0
            while loss(w - shrink * step) > loss(w) and shrink > 1e-4:  # backtrack: never a worse fit
                shrink /= 2
            w = w - shrink * step
            if np.abs(shrink * step).max() < 1e-10:
                break
        return cls(float(w[0]), float(w[1]))

    def __call__(self, probs: np.ndarray) -> np.ndarray:
        return (1 / (1 + np.exp(-(self.slope * base_logit(probs) + self.intercept)))).astype(np.float32)
