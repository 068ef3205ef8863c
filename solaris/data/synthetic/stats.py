"""Running totals over a generated world, for the figures meta.json reports.

The NE figures bracket what any model can reach on this world: the constant base rate is 1.0 by definition,
the oracle (the true click probabilities) is the floor, a per-item CTR table shows how much of the gap needs
more than item popularity, and the history-free oracle (the truth without fatigue and momentum, recalibrated)
shows how much of it only the user's recent history can close.
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from solaris.data.synthetic.simulate import HourBatch

# Beta prior strength (in impressions at the base rate) that smooths the per-item CTR table.
ITEM_CTR_PRIOR = 20.0
# Logit shifts tried to recalibrate the history-free oracle (dropping fatigue biases it upwards); the best
# one is kept, so its NE is not inflated by miscalibration. Keeps memory constant: no per-impression storage.
SHIFTS = np.linspace(-2.0, 1.0, 16)


@dataclass
class WorldStats:
    requests: int
    impressions: int
    clicks: int
    conversions: int
    oracle_log_loss: float
    history_free_log_loss: np.ndarray  # one total per SHIFTS entry
    candidate_pairs: int
    repeated_pairs: int
    item_impressions: np.ndarray
    item_clicks: np.ndarray

    @classmethod
    def empty(cls, n_items: int) -> WorldStats:
        zeros = np.zeros(n_items, np.int64)
        return cls(0, 0, 0, 0, 0.0, np.zeros(len(SHIFTS)), 0, 0, zeros, zeros.copy())

    def add(self, batch: HourBatch) -> None:
        click = batch.click.ravel()
        self.requests += len(batch.request_id)
        self.impressions += click.size
        self.clicks += int(click.sum())
        self.conversions += int(batch.conversion.sum())
        self.oracle_log_loss += _log_loss(batch.logit.ravel(), click)
        static = batch.static_logit.ravel()
        self.history_free_log_loss += [_log_loss(static + shift, click) for shift in SHIFTS]
        self.candidate_pairs += batch.repeated.size
        self.repeated_pairs += int(batch.repeated.sum())
        shown = batch.shown.ravel()
        self.item_impressions += np.bincount(shown, minlength=len(self.item_impressions))
        self.item_clicks += np.bincount(shown, weights=click, minlength=len(self.item_clicks)).astype(np.int64)

    def counts(self) -> dict[str, int]:
        return {
            "requests": self.requests,
            "impressions": self.impressions,
            "clicks": self.clicks,
            "conversions": self.conversions,
        }

    def summary(self) -> dict[str, object]:
        return {
            "ctr": _ratio(self.clicks, self.impressions),
            "conversions_per_click": _ratio(self.conversions, self.clicks),
            "candidate_repeat_share": _ratio(self.repeated_pairs, self.candidate_pairs),
            "ne": self._normalized_entropies(),
        }

    def _normalized_entropies(self) -> dict[str, float | None]:
        """NE = mean log loss / entropy of the base rate; undefined (None) when every label is the same."""
        if not 0 < self.clicks < self.impressions:
            return {"constant": None, "item_ctr": None, "oracle_without_history": None, "oracle": None}
        base = self.clicks / self.impressions
        entropy = -(base * np.log(base) + (1 - base) * np.log1p(-base))
        n, c = self.item_impressions, self.item_clicks
        p = (c + ITEM_CTR_PRIOR * base) / (n + ITEM_CTR_PRIOR)
        item_log_loss = -float((c * np.log(p) + (n - c) * np.log1p(-p)).sum())
        return {
            "constant": 1.0,
            "item_ctr": item_log_loss / self.impressions / entropy,
            "oracle_without_history": float(self.history_free_log_loss.min()) / self.impressions / entropy,
            "oracle": self.oracle_log_loss / self.impressions / entropy,
        }


def _log_loss(logit: np.ndarray, click: np.ndarray) -> float:
    """Summed binary log loss from logits: softplus(z) - y z, stable at any z."""
    return float((np.logaddexp(0.0, logit) - click * logit).sum())


def _ratio(num: int, den: int) -> float | None:
    return num / den if den else None
