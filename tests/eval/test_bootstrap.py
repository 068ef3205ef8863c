"""The paired bootstrap over requests: its sums are the metrics' own, and its 95% interval covers a known
NE difference at about the nominal rate on simulated requests (a calibration test, not a timing)."""

from __future__ import annotations

import numpy as np
import pytest

from solaris.eval.bootstrap import interval, request_sums, resampled_ne, transfer_samples
from solaris.models.metrics import normalized_entropy


def simulate(n_requests: int, rng: np.random.Generator) -> tuple[np.ndarray, np.ndarray, dict[str, np.ndarray]]:
    """Requests with a shared effect (so impressions of one request are correlated); model ``true`` knows it,
    model ``blind`` sees only the impression's own feature."""
    sizes = 1 + rng.poisson(4, n_requests)
    requests = np.repeat(np.arange(n_requests), sizes)
    effect = np.repeat(rng.normal(0, 1.0, n_requests), sizes)
    x = rng.normal(0, 1, len(requests))
    p_true = 1 / (1 + np.exp(-(-2 + effect + x)))
    labels = (rng.random(len(requests)) < p_true).astype(np.float64)
    blind = 1 / (1 + np.exp(-(-1.8 + 0.8 * x)))
    return requests, labels, {"true": p_true, "blind": blind}


def test_resampling_nothing_away_gives_the_metrics_ne() -> None:
    requests, labels, probs = simulate(300, np.random.default_rng(1))
    sums = request_sums(requests, labels, probs)
    assert sums.impressions.sum() == len(labels) and sums.clicks.sum() == labels.sum()
    everything = np.ones((1, len(sums.impressions)))
    n, rate = everything @ sums.impressions, (everything @ sums.clicks) / (everything @ sums.impressions)
    entropy = -(rate * np.log(rate) + (1 - rate) * np.log(1 - rate))
    ne = (everything @ sums.losses) / n[:, None] / entropy[:, None]
    for m, name in enumerate(probs):
        assert ne[0, m] == pytest.approx(normalized_entropy(labels, probs[name]), rel=1e-9)


def test_the_interval_covers_a_known_ne_difference_at_about_95_percent() -> None:
    rng = np.random.default_rng(7)
    requests, labels, probs = simulate(200_000, rng)  # the population: its difference is the truth
    truth = normalized_entropy(labels, probs["blind"]) - normalized_entropy(labels, probs["true"])
    covered = []
    for trial in range(200):
        requests, labels, probs = simulate(400, rng)
        ne = resampled_ne(request_sums(requests, labels, probs), resamples=400, seed=trial)
        low, high = interval(ne[:, 1] - ne[:, 0])
        covered.append(low <= truth <= high)
    assert 0.89 <= np.mean(covered) <= 0.99, np.mean(covered)


def test_resampling_impressions_instead_of_requests_would_be_overconfident() -> None:
    """Why the unit is the request: the same data resampled per impression gives a narrower interval."""
    requests, labels, probs = simulate(400, np.random.default_rng(3))
    per_request = resampled_ne(request_sums(requests, labels, probs), resamples=500, seed=0)
    per_impression = resampled_ne(request_sums(np.arange(len(labels)), labels, probs), resamples=500, seed=0)
    width = [np.subtract(*interval(ne[:, 0] - ne[:, 1])[::-1]) for ne in (per_request, per_impression)]
    assert width[1] < 0.8 * width[0]


def test_transfer_samples_follow_the_definition_and_the_same_seed_repeats() -> None:
    requests, labels, probs = simulate(500, np.random.default_rng(5))
    probs = {"fm": probs["true"], "base": probs["blind"], "half": (probs["true"] + probs["blind"]) / 2}
    sums = request_sums(requests, labels, probs)
    ne = resampled_ne(sums, resamples=300, seed=11)
    np.testing.assert_array_equal(ne, resampled_ne(sums, resamples=300, seed=11))
    ratio = transfer_samples(ne, base=1, variant=2, fm=0)
    np.testing.assert_allclose(ratio, (ne[:, 1] - ne[:, 2]) / (ne[:, 1] - ne[:, 0]))
    assert transfer_samples(ne, base=1, variant=0, fm=0) == pytest.approx(np.ones(300))
    low, high = interval(ratio)
    assert 0 < low < high < 1


def test_bad_inputs_are_named() -> None:
    with pytest.raises(ValueError, match="one entry per impression"):
        request_sums(np.arange(3), np.zeros(4), {"m": np.full(4, 0.5)})
    with pytest.raises(ValueError, match="at least two requests"):
        resampled_ne(request_sums(np.zeros(3), np.array([0, 1, 0]), {"m": np.full(3, 0.5)}))
