"""A span's served events: its impressions (the labelled pairs), the FM's probability for each, and the VM
inputs exactly as the ranker served them, read back from the features-as-served log.

Every model is scored on the same rows. The FM's inputs are built as of each impression (history strictly
before it) and the FM never trained on these hours, so nothing here has seen its label.
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.models.features import US_PER_HOUR, HistoryIndex, base_matrix, fm_matrix, hour_start_matrix, pair_key, ts_micros
from solaris.models.fm import FoundationModel, embed
from solaris.models.splits import Span
from solaris.models.vm import TIERS
from solaris.serving.servedlog import read_served, served_codes

SERVED_COLUMNS = ["request_id", "ts", "user_id", "item_id", "position"]


@dataclass(frozen=True)
class ServedEvents:
    click: np.ndarray  # (n,) float32
    fm_click: np.ndarray  # (n,) the FM's click probability, from the history strictly before the impression
    fm_click_hourly: np.ndarray  # (n,) the same as the precompute computes it: as of the hour's start, position 0
    base: np.ndarray  # (n, 4) the base VM's inputs
    served: np.ndarray  # (n, 4 + 3 * (code_dim + 1)) the SOLARIS VM's inputs as served
    tiers: np.ndarray  # (n,) int8 tier that fed each row
    hours: np.ndarray  # (n,) int64 hour index since the epoch, to split a span by time
    requests: np.ndarray  # (n,) int64 request id, the bootstrap's unit (a row without one is its own request)

    def __len__(self) -> int:
        return int(self.click.size)

    def select(self, mask: np.ndarray) -> ServedEvents:
        return ServedEvents(*(getattr(self, f)[mask] for f in self.__dataclass_fields__))


def concat(parts: list[ServedEvents]) -> ServedEvents:
    """Events of consecutive spans as one (each part read with its own version's codes and FM)."""
    return ServedEvents(*(np.concatenate([getattr(p, f) for p in parts]) for f in ServedEvents.__dataclass_fields__))


def served_events(
    log: EventLog,
    span: Span,
    served_dir: Path,
    embedding_version: str,
    code_dim: int,
    fm: FoundationModel,
    index: HistoryIndex,
    device: str,
) -> ServedEvents:
    """The span's impressions joined to what was served for each (by request and item); every row must have
    been served with ``embedding_version``, since a VM may only ever be fed the codes of its own version."""
    shown = log.impressions(span.start, span.end)
    served = read_served(served_dir, span.start, span.end, code_dim)
    versions = set(pc.unique(served["embedding_version"]).to_pylist())
    if versions - {embedding_version}:
        raise ValueError(f"{span} was served with embedding versions {sorted(versions)}, expected only {embedding_version!r}")
    order = _match(shown, served)
    served = served.take(pa.array(order))
    fm_click = embed(fm, fm_matrix(shown, index, fm.config.history), device=device).probs[:, 0]
    ts = ts_micros(shown["ts"])
    users, items = shown["user_id"].to_numpy(), shown["item_id"].to_numpy()
    fm_click_hourly = embed(fm, hour_start_matrix(shown, index, fm.config.history), device=device).probs[:, 0]
    base = base_matrix(users, items, ts, shown["position"].to_numpy())
    blocks = [base]
    for tier in TIERS:
        blocks += [served_codes(served, tier), served[f"{tier}_flag"].to_numpy().astype(np.float32)[:, None]]
    return ServedEvents(
        click=shown["click"].to_numpy().astype(np.float32),
        fm_click=fm_click.astype(np.float32),
        fm_click_hourly=fm_click_hourly.astype(np.float32),
        base=base,
        served=np.concatenate(blocks, axis=1, dtype=np.float32),
        tiers=served["tier"].to_numpy().astype(np.int8),
        hours=ts // US_PER_HOUR,
        requests=_request_ids(shown),
    )


def _request_ids(table: pa.Table) -> np.ndarray:
    """Request ids as int64; a row without one gets a negative id of its own (no request is shared)."""
    column = table["request_id"]
    ids = pc.fill_null(column, 0).to_numpy().astype(np.int64)
    missing = pc.is_null(column).to_numpy(zero_copy_only=False)
    ids[missing] = -1 - np.flatnonzero(missing)
    return ids


def _match(shown: pa.Table, served: pa.Table) -> np.ndarray:
    """Index into ``served`` of each shown impression; every impression must have been served exactly once."""
    keys = [_key(t) for t in (shown, served)]
    if len(np.unique(keys[1])) != len(keys[1]):
        raise ValueError("the served log holds a (request, item) pair twice: was an hour served twice?")
    order = np.argsort(keys[1])
    at = np.searchsorted(keys[1], keys[0], sorter=order)
    found = order[np.minimum(at, len(order) - 1)] if len(order) else np.zeros(len(keys[0]), np.int64)
    missing = (at >= len(order)) | (keys[1][found] != keys[0]) if len(order) else np.ones(len(keys[0]), bool)
    if missing.any():
        raise ValueError(f"{int(missing.sum())} impressions have no served row: the replay did not serve their hour")
    return found


def _key(table: pa.Table) -> np.ndarray:
    request = pc.fill_null(table["request_id"], -1).to_numpy().astype(np.int64)
    return pair_key(request, table["item_id"].to_numpy().astype(np.int64))
