"""The pair codes a VM learns from are the codes the precompute writes for the same pair and hour: history
before the hour's start, position 0 (no train/serve skew); the distillation target stays the FM as of the
impression itself. A VM trained on impression-time codes would meet a different input at serving."""

from __future__ import annotations


import numpy as np

from solaris.config import Settings
from solaris.data.hourly import HOUR
from solaris.models.features import fm_matrix
from solaris.models.fm import embed
from solaris.models.splits import Span
from solaris.models.vm_data import Teacher, build_vm_data
from solaris.precompute.embedding import embed_codes
from solaris.training.jobs import TrainReport, World


def test_training_codes_are_what_the_precompute_embeds_for_the_hour(trained: tuple[Settings, World, TrainReport]) -> None:
    _, world, report = trained
    hour = world.split.eval.start + 2 * HOUR
    teacher = Teacher(report.fm.model, report.ae.model, report.fm.version, report.ae.version, "cpu")
    data = build_vm_data(world.log, Span(hour, hour + HOUR), world.index, teacher)
    users, items = data.base[:, 0].astype(np.int64), data.base[:, 1].astype(np.int64)
    precomputed = embed_codes(report.fm.model, report.ae.model, world.index, users, items, hour, device="cpu")
    np.testing.assert_allclose(data.pair, precomputed, rtol=1e-4, atol=1e-5)
    shown = world.log.impressions(hour, hour + HOUR)
    as_of_impression = embed(report.fm.model, fm_matrix(shown, world.index, report.fm.model.config.history), device="cpu")
    np.testing.assert_allclose(data.fm_click, as_of_impression.probs[:, 0], rtol=1e-5)
