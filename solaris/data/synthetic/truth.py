"""The ground truth: true click and conversion probabilities, and the per-user history they depend on.

History is kept per user as exponentially decayed counts, decayed lazily (only users who appear in an hour
are touched), so an hour costs time in proportion to its traffic, not to the population. It is updated once
per hour, after that hour's outcomes are drawn: two requests of the same user within one hour do not see each
other (a documented simplification; requests an hour or more apart do).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solaris.data.synthetic.config import GroundTruth

NEVER = np.int32(-(2**30))


@dataclass
class History:
    """Per-user recent behaviour: exposures per daily-pool slot, clicks per category, last hour as candidate."""

    exposure: np.ndarray  # (n_users, pool_size) float32, decayed exposure count of the slot's item
    clicks: np.ndarray  # (n_users, n_categories) float32, decayed click count
    last_candidate: np.ndarray  # (n_users, pool_size) int32, hour the slot's item was last a candidate
    updated: np.ndarray  # (n_users,) int32, the hour the decayed values refer to

    @classmethod
    def empty(cls, n_users: int, pool_size: int, n_categories: int) -> History:
        return cls(
            exposure=np.zeros((n_users, pool_size), np.float32),
            clicks=np.zeros((n_users, n_categories), np.float32),
            last_candidate=np.full((n_users, pool_size), NEVER, np.int32),
            updated=np.zeros(n_users, np.int32),
        )

    def _decay(self, users: np.ndarray, hour: int, tau: float) -> np.ndarray:
        return np.exp(-(hour - self.updated[users]) / tau).astype(np.float32)[:, None]

    def exposures(self, users: np.ndarray, slots: np.ndarray, hour: int, tau: float) -> np.ndarray:
        return self.exposure[users[:, None], slots] * self._decay(users, hour, tau)

    def category_clicks(self, users: np.ndarray, categories: np.ndarray, hour: int, tau: float) -> np.ndarray:
        return self.clicks[users[:, None], categories] * self._decay(users, hour, tau)

    def repeated(self, users: np.ndarray, slots: np.ndarray, hour: int, window: int) -> np.ndarray:
        """Whether each (user, slot) item was already a candidate in the ``window`` hours before ``hour``."""
        return self.last_candidate[users[:, None], slots] >= hour - window

    def record(
        self,
        hour: int,
        truth: GroundTruth,
        users: np.ndarray,
        candidate_slots: np.ndarray,
        shown_slots: np.ndarray,
        shown_categories: np.ndarray,
        clicks: np.ndarray,
    ) -> None:
        """Fold one hour of requests into the history (decay touched users to ``hour``, then add)."""
        touched = np.unique(users)
        age = (hour - self.updated[touched]).astype(np.float32)[:, None]
        self.exposure[touched] *= np.exp(-age / truth.fatigue_tau_hours)
        self.clicks[touched] *= np.exp(-age / truth.momentum_tau_hours)
        self.updated[touched] = hour
        rows = np.broadcast_to(users[:, None], shown_slots.shape)
        np.add.at(self.exposure, (rows, shown_slots), 1.0)
        np.add.at(self.clicks, (rows, shown_categories), clicks.astype(np.float32))
        self.last_candidate[users[:, None], candidate_slots] = hour

    def follow_pools(self, users: np.ndarray, sources: np.ndarray) -> None:
        """Move slot history to the users' new pools (``sources`` from retrieval.slot_sources)."""
        kept = sources >= 0
        src = np.maximum(sources, 0)
        self.exposure[users] = np.where(kept, np.take_along_axis(self.exposure[users], src, axis=1), 0.0)
        self.last_candidate[users] = np.where(kept, np.take_along_axis(self.last_candidate[users], src, axis=1), NEVER)


def sigmoid(x: np.ndarray) -> np.ndarray:
    return 1.0 / (1.0 + np.exp(-x))


def static_logit(
    truth: GroundTruth,
    intercept: float,
    user_latent: np.ndarray,
    item_latent: np.ndarray,
    time_of_day: np.ndarray,
    positions: np.ndarray,
    user_bias: np.ndarray,
    item_bias: np.ndarray,
) -> np.ndarray:
    """The click logit's history-free part for (R, S) impressions; ``user_latent`` is (R, d), ``item_latent``
    (R, S, d). What a model without the user's history could at best know (given today's interests)."""
    half = user_latent.shape[1] // 2
    aff_a = np.einsum("rd,rsd->rs", user_latent[:, :half], item_latent[:, :, :half])
    aff_b = np.einsum("rd,rsd->rs", user_latent[:, half:], item_latent[:, :, half:])
    return (
        intercept
        + truth.affinity_hinge * np.maximum(aff_a + aff_b - truth.hinge_at, 0.0)
        + truth.affinity_product * aff_a * aff_b
        + time_of_day
        - truth.position * np.log2(1.0 + positions)
        + user_bias[:, None]
        + item_bias
    )


def history_logit(truth: GroundTruth, exposures: np.ndarray, category_clicks: np.ndarray) -> np.ndarray:
    """The click logit's history part: fatigue from recent exposures, momentum from recent category clicks."""
    return truth.momentum * np.log1p(category_clicks) - truth.fatigue * exposures


def solve_intercept(logits: np.ndarray, target: float) -> float:
    """The intercept b with mean(sigmoid(logits + b)) == target, by bisection (the mean rises with b).

    Solving it on the world's own impressions keeps the click rate on target whatever the sizes: a bigger
    catalogue makes retrieval more selective and would otherwise inflate affinities and clicks.
    """
    lo, hi = -30.0, 30.0
    for _ in range(60):
        mid = (lo + hi) / 2
        lo, hi = (mid, hi) if sigmoid(logits + mid).mean() < target else (lo, mid)
    return (lo + hi) / 2


def time_of_day_effect(truth: GroundTruth, category_phase: np.ndarray, hour_of_day: int) -> np.ndarray:
    """Each category peaks at its own hour of the day; indexed by category."""
    return truth.time_of_day * np.cos(2 * np.pi * (hour_of_day - category_phase) / 24)


def conversion_probability(
    truth: GroundTruth, trait: np.ndarray, price_bucket: np.ndarray, n_price_buckets: int
) -> np.ndarray:
    """True P(conversion | click): price helps or hurts depending on the user's spending trait."""
    half = max(1.0, (n_price_buckets - 1) / 2)
    price = (price_bucket - (n_price_buckets - 1) / 2) / half
    logit = truth.conversion_logit + price * (truth.conversion_price_trait * trait[:, None] + truth.conversion_price)
    return sigmoid(logit)
