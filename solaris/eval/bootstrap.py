"""Paired bootstrap over requests: 95% intervals for each model's NE, NE differences and transfer ratios.

The impressions of one request share a user, a moment and a candidate list, so they are not independent:
the unit resampled is the request. Every model is scored on the same resample (paired), so a difference
between two models on the same events gets the interval of the difference, far narrower than the two NEs'.
A resample needs only per-request sums (impressions, clicks, each model's summed log loss), so 1,000
resamples of a span cost a few matrix products, not 1,000 passes over the events.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass

import numpy as np

from solaris.models.metrics import EPS

RESAMPLES = 1000
LEVEL = 0.95
_CHUNK = 100  # resamples drawn at once: (chunk x requests) weights stay small in memory


@dataclass(frozen=True)
class RequestSums:
    """Per request: impressions, clicks and each model's summed log loss (columns in ``names`` order)."""

    names: tuple[str, ...]
    impressions: np.ndarray  # (R,)
    clicks: np.ndarray  # (R,)
    losses: np.ndarray  # (R, M)


def request_sums(requests: np.ndarray, labels: np.ndarray, probs: Mapping[str, np.ndarray]) -> RequestSums:
    """Sum each impression into its request; ``requests`` holds one request id per impression."""
    y = np.asarray(labels, np.float64)
    if len(requests) != len(y) or any(len(p) != len(y) for p in probs.values()):
        raise ValueError("requests, labels and every model's probabilities must have one entry per impression")
    _, index = np.unique(requests, return_inverse=True)
    n = int(index.max()) + 1 if len(index) else 0
    losses = np.empty((n, len(probs)))
    for m, p in enumerate(probs.values()):
        p = np.clip(np.asarray(p, np.float64), EPS, 1 - EPS)
        losses[:, m] = np.bincount(index, -(y * np.log(p) + (1 - y) * np.log1p(-p)), minlength=n)
    impressions = np.bincount(index, minlength=n).astype(np.float64)
    return RequestSums(tuple(probs), impressions, np.bincount(index, y, n), losses)


def resample_weights(n_requests: int, resamples: int, rng: np.random.Generator) -> Iterator[np.ndarray]:
    """Each resample as how often it draws each request (n draws with replacement)."""
    for start in range(0, resamples, _CHUNK):
        size = min(_CHUNK, resamples - start)
        yield rng.multinomial(n_requests, np.full(n_requests, 1.0 / n_requests), size=size).astype(np.float64)


def resampled_ne(sums: RequestSums, resamples: int = RESAMPLES, seed: int = 0) -> np.ndarray:
    """(resamples, models) NE of every model on each resample of the requests."""
    if len(sums.impressions) < 2:
        raise ValueError("a bootstrap over requests needs at least two requests")
    rng = np.random.default_rng(seed)
    out = []
    for w in resample_weights(len(sums.impressions), resamples, rng):
        n, clicks = w @ sums.impressions, w @ sums.clicks
        rate = np.clip(clicks / n, EPS, 1 - EPS)
        entropy = -(rate * np.log(rate) + (1 - rate) * np.log1p(-rate))
        out.append((w @ sums.losses) / n[:, None] / entropy[:, None])
    return np.concatenate(out)


def interval(samples: np.ndarray, level: float = LEVEL) -> tuple[float, float]:
    """The percentile interval of a bootstrap distribution."""
    tail = (1 - level) / 2 * 100
    low, high = np.percentile(samples, [tail, 100 - tail])
    return float(low), float(high)


def transfer_samples(ne: np.ndarray, base: int, variant: int, fm: int) -> np.ndarray:
    """The transfer ratio on each resample: (NE base - NE variant) / (NE base - NE FM)."""
    gap = ne[:, base] - ne[:, fm]
    with np.errstate(divide="ignore", invalid="ignore"):
        return (ne[:, base] - ne[:, variant]) / gap
