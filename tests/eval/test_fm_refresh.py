"""Where a replay's FM refreshes fall: one cadence before the evaluation span, earlier ones a cadence apart,
never in the logging span's first hours, and a logging span too short for a refresh and its shadow refused
by name."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from solaris.data.hourly import HOUR
from solaris.eval.fm_refresh import FIRST_VERSION_MIN_HOURS, refresh_hours
from solaris.eval.spans import ReplaySpans
from solaris.models.splits import Span
from solaris.precompute.params import PrecomputeParams

T0 = datetime(2026, 1, 1, tzinfo=UTC)
SHADOW = PrecomputeParams.shadow_hours


def spans(train: int, logging: int, eval_: int) -> ReplaySpans:
    edges = [T0 + h * HOUR for h in (0, train, train + logging, train + logging + eval_)]
    return ReplaySpans(Span(edges[0], edges[1]), Span(edges[1], edges[2]), Span(edges[2], edges[3]))


@pytest.mark.parametrize(
    ("hours", "expected"),
    [
        ((60, 36, 24), [72]),  # the default world: one refresh, a day before the evaluation span
        ((36, 22, 14), [36 + FIRST_VERSION_MIN_HOURS]),  # tiny: the logging span is shorter than a day
        ((107, 65, 43), [124, 148]),  # MovieLens at 24x: two daily refreshes in the logging span
    ],
)
def test_daily_refreshes_end_one_day_before_the_evaluation_span(
    hours: tuple[int, int, int], expected: list[int]
) -> None:
    assert refresh_hours(spans(*hours), "daily", SHADOW) == [T0 + h * HOUR for h in expected]


def test_a_longer_shadow_needs_a_longer_logging_span_and_stays_shorter_than_the_cadence() -> None:
    """Trained at hour 40, the version serves from 40 + shadow: from 44 with 4 h of shadow (4 h left to refresh
    the VMs on before the evaluation span at 48), from 46 with 6 h (2 h left, fewer than 3: refused)."""
    assert refresh_hours(spans(36, 12, 14), "daily", 4) == [T0 + 40 * HOUR]
    with pytest.raises(ValueError, match="too short for an FM refresh: it needs 13 hours"):
        refresh_hours(spans(36, 12, 14), "daily", 6)
    with pytest.raises(ValueError, match="shadow_hours 24 must be shorter than the FM's refresh cadence"):
        refresh_hours(spans(60, 36, 24), "daily", 24)


def test_no_refresh_keeps_the_first_fm() -> None:
    assert refresh_hours(spans(60, 36, 24), "none", SHADOW) == []


def test_a_logging_span_too_short_or_an_unknown_cadence_is_refused_by_name() -> None:
    with pytest.raises(ValueError, match="too short for an FM refresh"):
        refresh_hours(spans(36, 5, 14), "daily", SHADOW)
    with pytest.raises(ValueError, match="fm_refresh 'hourly'"):
        refresh_hours(spans(60, 36, 24), "hourly", SHADOW)
