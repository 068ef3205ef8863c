"""Metrics against values computed by hand."""

from __future__ import annotations

import math

import numpy as np
import pytest

from solaris.models import metrics


def test_log_loss_by_hand() -> None:
    expected = -(math.log(0.8) + math.log(0.6)) / 2
    assert metrics.log_loss(np.array([1, 0]), np.array([0.8, 0.4])) == pytest.approx(expected)


def test_ne_divides_by_the_base_rate_entropy() -> None:
    y, p = np.array([1, 0, 0, 0]), np.array([0.5, 0.2, 0.1, 0.1])
    entropy = -(0.25 * math.log(0.25) + 0.75 * math.log(0.75))
    loss = -(math.log(0.5) + math.log(0.8) + 2 * math.log(0.9)) / 4
    assert metrics.normalized_entropy(y, p) == pytest.approx(loss / entropy)
    assert metrics.normalized_entropy(y, np.full(4, 0.25)) == pytest.approx(1.0)


def test_auc_counts_ordered_pairs_and_halves_ties() -> None:
    # Positives 0.35 and 0.8 against negatives 0.1 and 0.4: 3 of 4 pairs ordered.
    assert metrics.auc(np.array([0, 0, 1, 1]), np.array([0.1, 0.4, 0.35, 0.8])) == pytest.approx(0.75)
    assert metrics.auc(np.array([0, 1]), np.array([0.5, 0.5])) == pytest.approx(0.5)
    assert metrics.auc(np.array([0, 0, 1]), np.array([0.2, 0.7, 0.7])) == pytest.approx(0.75)


def test_calibration_is_mean_predicted_over_observed() -> None:
    assert metrics.calibration(np.array([1, 0]), np.array([0.2, 0.4])) == pytest.approx(0.6)


def test_transfer_ratio_is_the_captured_share_of_the_fm_gain() -> None:
    assert metrics.transfer_ratio(ne_base=1.0, ne_variant=0.97, ne_fm=0.9) == pytest.approx(0.3)
    with pytest.raises(ValueError, match="does not beat"):
        metrics.transfer_ratio(ne_base=0.9, ne_variant=0.95, ne_fm=0.95)


@pytest.mark.parametrize(
    ("labels", "probs", "message"),
    [
        ([1, 0], [0.5], "differ in length"),
        ([1, 0], [0.5, 1.5], r"\[0, 1\]"),
        ([], [], "at least one"),
    ],
)
def test_bad_input_is_refused(labels: list[float], probs: list[float], message: str) -> None:
    with pytest.raises(ValueError, match=message):
        metrics.log_loss(np.array(labels), np.array(probs))


def test_ne_undefined_for_one_class() -> None:
    with pytest.raises(ValueError, match="every label is the same"):
        metrics.normalized_entropy(np.zeros(3), np.full(3, 0.1))
