"""Who the hourly KNN covers: the active users (a request or a sign-up in the lookback) as queries, the users
with a pair code fresh during the hour as the pool, each with the FM's user vector."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq
import pytest
import torch
from precompute_logs import T0, build_log

from solaris.data.schema import TS
from solaris.models.features import IdTable
from solaris.models.fm import FMConfig, FoundationModel, user_vectors
from solaris.precompute.knn_users import active_users

H = timedelta(hours=1)


def test_active_users_requested_or_signed_up_in_the_lookback(tmp_path: Path) -> None:
    log = build_log(tmp_path / "log", [(T0 - 30 * H, 1, [5]), (T0 - 2 * H, 2, [5]), (T0, 3, [5])])
    assert active_users(log, T0, 24).tolist() == [2]  # no signup_ts (an imported log): requests only
    signup = [T0 - 100 * H, T0 - 100 * H, T0 - 100 * H, T0 - H, T0, T0 - 30 * H]
    users = pa.table({"user_id": pa.array(range(1, 7), pa.int64()), "signup_ts": pa.array(signup, TS)})
    pq.write_table(users, log.root / "users.parquet")
    # 1 requested 30 h ago, 3 at T0 (not before it), 4 signed up an hour ago, 5 at T0, 6 thirty hours ago.
    assert active_users(log, T0, 24).tolist() == [2, 4]
    assert active_users(log, T0, 48).tolist() == [1, 2, 4, 6]


def test_the_fms_user_vector_is_its_id_and_side_feature_embedding() -> None:
    users = IdTable(np.array([[0], [1], [2]]), ("u_country",))  # row 0 unknown; users 0 and 1
    items = IdTable(np.array([[0], [1]]), ("i_category",))
    fm = FoundationModel(FMConfig(history=2, id_dim=4, hidden=8, embedding_dim=8), users, items)
    with pytest.raises(ValueError, match="eval mode"):  # training mode drops ids at random (id_dropout)
        user_vectors(fm, np.array([1]))
    fm.eval()
    fm.user.trained[1:] = True  # as if training had looked both users up
    got = user_vectors(fm, np.array([1, 0, 99]))
    with torch.no_grad():
        rows = [2, 1, 0]  # id + 1 for a known id, 0 for an unknown one; side-feature rows alike here
        want = fm.user.ids.weight[rows] + fm.user.side.weight[rows]
    assert got.shape == (3, 4) and got.dtype == np.float32
    np.testing.assert_allclose(got, want.numpy(), rtol=1e-6)  # 99 is unknown: the learned 'unknown' row
