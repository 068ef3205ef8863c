"""The pair codes a VM learns from are the codes the precompute writes for the same pair and hour: history
before the hour's start, position 0 (no train/serve skew); the distillation target stays the FM as of the
impression itself. A VM trained on impression-time codes would meet a different input at serving."""

from __future__ import annotations

from datetime import UTC, datetime

import numpy as np

from solaris.config import Settings
from solaris.data.hourly import HOUR
from solaris.models.features import US_PER_HOUR, fm_matrix, pair_key, ts_micros
from solaris.models.fm import embed
from solaris.models.splits import Span
from solaris.models.vm_data import Teacher, age_hours, build_vm_data
from solaris.precompute.embedding import embed_codes
from solaris.training.jobs import TrainReport, World


def test_training_codes_are_what_the_precompute_embeds_for_the_hour(
    trained: tuple[Settings, World, TrainReport],
) -> None:
    _, world, report = trained
    hour = world.split.eval.start + 2 * HOUR
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, Span(hour, hour + HOUR), world.index, teacher, served_age_hours=1)
    users, items = data.base[:, 0].astype(np.int64), data.base[:, 1].astype(np.int64)
    precomputed = embed_codes(report.fm.model, report.ae.model, world.index, users, items, hour, device="cpu")
    np.testing.assert_allclose(data.pair, precomputed, rtol=1e-4, atol=1e-5)
    shown = world.log.impressions(hour, hour + HOUR)
    as_of_impression = embed(
        report.fm.model, fm_matrix(shown, world.index, report.fm.model.config.history), device="cpu"
    )
    np.testing.assert_allclose(data.fm_probs, as_of_impression.probs, rtol=1e-5)  # both heads: every VM's target


def test_validation_codes_are_as_old_as_serving_has_them(trained: tuple[Settings, World, TrainReport]) -> None:
    """A served code was written up to ``ttl_hours - 1`` hours before: a row is validated with the code the
    precompute wrote that many hours before its hour, and a pair's age grows by one an hour, then starts over."""
    _, world, report = trained
    hour, ttl = world.split.eval.start + 5 * HOUR, 4
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, Span(hour, hour + 2 * HOUR), world.index, teacher, served_age_hours=ttl)
    shown = world.log.impressions(hour, hour + 2 * HOUR)
    ages, row_hour = age_hours(shown, ttl), ts_micros(shown["ts"]) // US_PER_HOUR
    assert set(ages.tolist()) == set(range(ttl))
    users, items = data.base[:, 0].astype(np.int64), data.base[:, 1].astype(np.int64)
    keys, first = pair_key(users, items), row_hour == row_hour.min()
    in_both = np.isin(keys, keys[first]) & ~first
    age_before = dict(zip(keys[first], ages[first], strict=False))
    assert in_both.any() and all(ages[r] == (age_before[keys[r]] + 1) % ttl for r in np.flatnonzero(in_both))
    for written in np.unique(row_hour - ages):
        rows = np.flatnonzero(row_hour - ages == written)
        at = datetime.fromtimestamp(int(written) * 3600, UTC)
        precomputed = embed_codes(
            report.fm.model, report.ae.model, world.index, users[rows], items[rows], at, device="cpu"
        )
        np.testing.assert_allclose(data.pair_served[rows], precomputed, rtol=1e-4, atol=1e-5)
