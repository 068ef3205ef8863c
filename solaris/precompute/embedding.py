"""The precompute's FM path: history as of the hour, FM forward in batches, AE compression to store codes.

Inputs are built one batch at a time (history lookup and exposure counts for that batch only), so memory
follows the batch size, not the shard. Features come from :func:`solaris.models.features.pair_matrix`, the
function training uses, so a precomputed embedding is the one the VM was trained on. Position is unknown
before serving and the FM's embedding does not depend on it, so it is 0.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.models.autoencoder import Autoencoder, compress
from solaris.models.features import HistoryIndex, pair_matrix
from solaris.models.fm import FoundationModel, embed
from solaris.store.codec import to_micros

HISTORY_COLUMNS = ["user_id", "ts", "item_id", "click", "conversion"]


def history_table(log: EventLog, user_ids: np.ndarray, before: datetime, hours: int) -> pa.Table:
    """Impressions of ``user_ids`` in ``[before - hours, before)``: all the history the FM may see."""
    return log.impressions(before - timedelta(hours=hours), before, HISTORY_COLUMNS, user_ids)


def of_users(impressions: pa.Table, user_ids: np.ndarray) -> pa.Table:
    return impressions.filter(pc.is_in(impressions["user_id"], value_set=pa.array(np.unique(user_ids), pa.int64())))


def history_index(log: EventLog, user_ids: np.ndarray, before: datetime, hours: int) -> HistoryIndex:
    return HistoryIndex.from_table(history_table(log, user_ids, before, hours))


def embed_codes(
    fm: FoundationModel,
    ae: Autoencoder,
    index: HistoryIndex,
    user_ids: np.ndarray,
    item_ids: np.ndarray,
    at: datetime,
    batch_size: int = 4096,
    device: str = "auto",
    new_users: bool = False,
) -> np.ndarray:
    """AE codes ``[n, code_dim]`` float32 of the FM embeddings of the pairs as of ``at`` (``new_users``: each
    user as one the FM never saw, :meth:`~solaris.models.fm.FoundationModel.outputs`)."""
    users = np.asarray(user_ids, dtype=np.int64)
    items = np.asarray(item_ids, dtype=np.int64)
    if users.shape != items.shape:
        raise ValueError(f"user_ids {users.shape} and item_ids {items.shape} differ in shape")
    ts = np.full(len(users), to_micros(at, "at"), dtype=np.int64)
    batches = (_inputs(fm, index, users, items, ts, s, batch_size) for s in range(0, len(users), batch_size))
    codes = [compress(ae, embed(fm, x, batch_size, device, new_users).embedding) for x in batches]
    return np.concatenate(codes) if codes else np.zeros((0, ae.config.code_dim), np.float32)


def _inputs(
    fm: FoundationModel, index: HistoryIndex, users: np.ndarray, items: np.ndarray, ts: np.ndarray, s: int, n: int
) -> np.ndarray:
    rows = slice(s, s + n)
    return pair_matrix(users[rows], items[rows], ts[rows], np.zeros(len(ts[rows]), np.int64), index, fm.config.history)
