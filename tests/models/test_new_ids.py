"""A new user or item is really known: the 'unknown' id row every id no training step reached takes is itself
trained (a share of ids is hidden in training, as a new id is), on a log with no side features as on any
other."""

from __future__ import annotations

from dataclasses import replace

import numpy as np
import pyarrow.parquet as pq
import pytest
import torch

from solaris.models.features import fm_matrix, labels
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.training import FitConfig, train_fm
from solaris.training.jobs import World

pytestmark = pytest.mark.slow


@pytest.fixture(scope="module")
def plain_world(tmp_path_factory: pytest.TempPathFactory) -> World:
    """The tiny world with its side features dropped: what a team's plain log holds."""
    from solaris.data.synthetic import PRESETS, generate_world

    root = tmp_path_factory.mktemp("plain") / "tiny"
    generate_world(PRESETS["tiny"].with_seed(0), root, overwrite=True, progress=False)
    for name, key in (("users.parquet", "user_id"), ("items.parquet", "item_id")):
        pq.write_table(pq.read_table(root / name, columns=[key]), root / name)
    return World.open(root)


def _trained(world: World, id_dropout: float) -> FoundationModel:
    config = replace(FMConfig(), history=8, hidden=64, embedding_dim=32, id_dropout=id_dropout)
    fit = FitConfig(epochs=2, patience=2, weight_decay=1e-4, progress=False, threads=1)
    split = world.split
    fm, _ = train_fm(world.log, split.fm_train, split.valid, world.index, world.users, world.items, config, fit)
    return fm


def test_the_unknown_rows_are_learned_on_a_log_without_side_features(plain_world: World) -> None:
    assert not plain_world.users.names and not plain_world.items.names
    fm = _trained(plain_world, FMConfig().id_dropout)
    for side in (fm.user, fm.item):
        assert float(side.ids.weight[0].detach().norm()) > 0.05, "the unknown row decayed to zero: no id was hidden"

    shown = plain_world.log.impressions(plain_world.split.eval.start, plain_world.split.eval.end)
    x = fm_matrix(shown, plain_world.index, fm.config.history)
    known = embed(fm, x, device="cpu").probs[:, 0]
    x[:, 0] = plain_world.users.vocab + 10  # every user one the FM never saw: the unknown row
    new_user = embed(fm, x, device="cpu").probs[:, 0]
    rate = float(labels(shown)[:, 0].mean())
    assert np.abs(_logit(new_user) - _logit(rate)).mean() > 0.05  # a new user's score is not the base rate
    assert not np.allclose(new_user, known)

    with torch.no_grad():
        fm.user.ids.weight[0] = 0.0  # what the FM gave new users before: the row no step reached, decayed to zero
    zeroed = embed(fm, x, device="cpu").probs[:, 0]
    assert np.abs(_logit(zeroed) - _logit(new_user)).mean() > 5e-3  # the learned row carries something of its own


def _logit(p: np.ndarray | float) -> np.ndarray:
    return np.log(p) - np.log1p(-np.asarray(p))


def test_without_id_dropout_the_unknown_row_is_what_weight_decay_leaves(plain_world: World) -> None:
    """The defect the trained row removes: no step reaches row 0, and coupled weight decay zeroes it."""
    fm = _trained(plain_world, 0.0)
    assert float(fm.user.ids.weight[0].detach().norm()) < 1e-3


def test_a_new_item_takes_the_learned_unknown_row(plain_world: World) -> None:
    fm = _trained(plain_world, FMConfig().id_dropout)
    unseen = plain_world.items.vocab + 5
    assert not fm.item.known(np.array([unseen]))[0]
    table = plain_world.log.impressions(plain_world.split.eval.start, plain_world.split.eval.end).slice(0, 200)
    x = fm_matrix(table, plain_world.index, fm.config.history)
    x[:, 1] = unseen
    assert embed(fm, x, device="cpu").embedding.std(axis=0).max() > 0  # scored, from the unknown row and history
    item_vector = fm.item(fm.item.rows(torch.tensor([unseen]))).detach()
    assert float(item_vector.norm()) > 0.05  # what the A2A tier would look it up by: not a zero vector
