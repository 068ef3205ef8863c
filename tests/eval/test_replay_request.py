"""A replay takes the precompute's knobs that ``REPLAY_KNOBS`` declares, with their bounds, from any front end."""

from __future__ import annotations

import pytest

from solaris.config import Settings
from solaris.eval.job import ReplayRequest, replay_config


def test_a_replay_request_takes_the_declared_knobs_within_their_bounds() -> None:
    request = ReplayRequest(preset="tiny", knobs={"cohorts": 8, "ttl_hours": 6})
    config = replay_config(Settings.from_env({}), request, seed=3)
    assert (config.cohorts, config.ttl_hours, config.seed) == (8, 6, 3)
    with pytest.raises(
        ValueError,
        match="a replay takes the knobs top_fraction, ttl_hours, ttl_jitter_hours, cohorts, cohort_items, not",
    ):
        ReplayRequest(preset="tiny", knobs={"fm_budget": 10})
    with pytest.raises(ValueError, match="ttl_hours"):
        ReplayRequest(preset="tiny", knobs={"ttl_hours": 0})
