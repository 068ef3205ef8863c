"""Platt scaling recovers a known distortion and never worsens log loss on the rows it was fitted on."""

from __future__ import annotations

import numpy as np
import pytest

from solaris.models.calibration import PlattScaling
from solaris.models.layers import base_logit
from solaris.models.metrics import log_loss


def test_recovers_a_known_distortion_of_the_logit() -> None:
    rng = np.random.default_rng(0)
    true = 1 / (1 + np.exp(-rng.normal(-2.5, 1.0, 200_000)))
    labels = (rng.random(true.size) < true).astype(float)
    distorted = 1 / (1 + np.exp(-(base_logit(true) - 0.3) / 0.8))  # a drifted, overconfident teacher

    scaling = PlattScaling.fit(distorted, labels)

    assert scaling.slope == pytest.approx(0.8, abs=0.03) and scaling.intercept == pytest.approx(0.3, abs=0.05)
    assert log_loss(labels, scaling(distorted)) < log_loss(labels, distorted)


def test_refuses_labels_of_one_class() -> None:
    with pytest.raises(ValueError, match="both classes"):
        PlattScaling.fit(np.full(10, 0.1), np.zeros(10))
