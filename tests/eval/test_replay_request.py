"""A replay takes the precompute's knobs that ``REPLAY_KNOBS`` declares, with their bounds, from any front end."""

from __future__ import annotations

import pytest

from solaris.config import Settings
from solaris.eval.job import ReplayRequest, replay_config
from solaris.eval.protocol import REPLAY_KNOBS


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


def test_every_declared_knob_reaches_the_precompute_a_replay_runs() -> None:
    """Set each knob away from its default: the precompute parameters of the replay's main run carry it (a knob
    the replay's config does not pass on would be silently the default)."""
    values = {"top_fraction": 0.3, "ttl_hours": 6, "ttl_jitter_hours": 1, "cohorts": 8, "cohort_items": 50}
    assert set(values) == set(REPLAY_KNOBS)
    config = replay_config(Settings.from_env({}), ReplayRequest(preset="tiny", knobs=values), seed=0)

    params = config.precompute_params(config.top_fraction)

    assert {name: params[name] for name in REPLAY_KNOBS} == values
