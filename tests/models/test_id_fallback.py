"""What a model knows of an id does not live only in an id row training never reached: an id no training
step looked up takes the learned 'unknown' id row and keeps its own side features; the record of which ids
were trained travels with the weights."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import torch

from solaris.models import files
from solaris.models.features import IdTable
from solaris.models.fm import FMConfig, FoundationModel
from solaris.models.layers import SideEmbedding

# ids 0-5 (rows 1-6); side feature: id % 2 (stored +1, 0 = unknown)
TABLE = IdTable(np.r_[[0], np.arange(6) % 2 + 1][:, None].astype(np.int64), ("x_parity",))


def embedding(id_dropout: float = 0.0) -> SideEmbedding:
    torch.manual_seed(0)
    layer = SideEmbedding(TABLE, 4, id_dropout)
    torch.nn.init.normal_(layer.ids.weight)
    return layer


def test_an_id_no_training_step_reached_takes_the_unknown_id_row_with_its_own_side_features() -> None:
    layer = embedding()
    rows = layer.rows(torch.tensor([0, 1, 4]))
    layer.train()
    layer(rows[:2])  # a training step looks up ids 0 and 1
    layer.eval()
    out = layer(rows)
    side = layer.side(layer.features[rows] + layer.offsets).sum(dim=-2)
    torch.testing.assert_close(out[:2], layer.ids(rows[:2]) + side[:2])  # trained: their own rows
    torch.testing.assert_close(out[2], layer.ids.weight[0] + side[2])  # id 4: the unknown row, its own parity
    assert not torch.equal(out[2], layer(layer.rows(torch.tensor([5])))[0])  # id 5: the other parity
    assert layer.known(np.array([0, 1, 4, 5, -1, 99])).tolist() == [True, True, False, False, False, False]


def test_id_dropout_hides_a_share_of_known_ids_in_training_only() -> None:
    layer = embedding(id_dropout=0.5)
    rows = layer.rows(torch.zeros(4000, dtype=torch.long))
    side = layer.side(layer.features[rows] + layer.offsets).sum(dim=-2)

    def hidden() -> torch.Tensor:
        return torch.isclose(layer(rows) - side, layer.ids.weight[0].expand(len(rows), -1)).all(dim=1)

    layer.train()
    assert abs(float(hidden().float().mean()) - 0.5) < 0.05
    layer.eval()
    assert not hidden().any()  # at serving a trained id always has its own row
    with pytest.raises(ValueError, match="id_dropout"):
        SideEmbedding(TABLE, 4, 1.0)


def test_the_trained_ids_travel_with_the_weights_and_an_older_model_is_refused(tmp_path: Path) -> None:
    items = IdTable(TABLE.features.copy(), TABLE.names)
    fm = FoundationModel(FMConfig(history=2, id_dim=4, hidden=8, embedding_dim=8), TABLE, items)
    fm.user.trained[fm.user.rows(torch.tensor([3]))] = True
    files.save(fm, tmp_path / "fm")
    loaded = files.load(tmp_path / "fm")
    assert torch.equal(loaded.user.trained, fm.user.trained) and loaded.user.id_dropout == FMConfig().id_dropout
    state = files.load_tensors((tmp_path / "fm" / files.WEIGHTS_FILE).read_bytes())
    older = {k: v for k, v in state.items() if not k.endswith(".trained")}
    with pytest.raises(ValueError, match="train it again"):
        files._build({"kind": "fm", "config": {}, "side_features": {"user": ["x_parity"], "item": ["x_parity"]}}, older)
