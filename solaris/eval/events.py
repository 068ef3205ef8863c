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
from solaris.models.features import US_PER_HOUR, VM_BASE_COLUMNS, HistoryIndex, fm_matrix, hour_start_matrix, ts_micros
from solaris.models.fm import FoundationModel, embed
from solaris.models.splits import Span
from solaris.serving.served_rows import joined, served_matrix

SERVED_COLUMNS = ["request_id", "ts", "user_id", "item_id", "position"]


@dataclass(frozen=True)
class ServedEvents:
    click: np.ndarray  # (n,) float32
    fm_click: np.ndarray  # (n,) the FM's click probability, from the history strictly before the impression
    fm_click_hourly: np.ndarray  # (n,) the same as the precompute computes it: as of the hour's start, position 0
    fm_click_hourly_positioned: np.ndarray  # (n,) the same at the impression's position: an ablation
    base: np.ndarray  # (n, 10) the base VM's inputs as served: ids, hour, position, counters
    served: np.ndarray  # (n, 10 + 4 * (code_dim + 1)) the SOLARIS VM's inputs as served
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
    shown, served = joined(log, span, served_dir, embedding_version, code_dim)
    fm_click = embed(fm, fm_matrix(shown, index, fm.config.history), device=device).probs[:, 0]
    ts = ts_micros(shown["ts"])
    fm_click_hourly = embed(fm, hour_start_matrix(shown, index, fm.config.history), device=device).probs[:, 0]
    positioned = hour_start_matrix(shown, index, fm.config.history, at_position=True)
    fm_click_hourly_positioned = embed(fm, positioned, device=device).probs[:, 0]
    inputs = served_matrix(shown, served)
    return ServedEvents(
        click=shown["click"].to_numpy().astype(np.float32),
        fm_click=fm_click.astype(np.float32),
        fm_click_hourly=fm_click_hourly.astype(np.float32),
        fm_click_hourly_positioned=fm_click_hourly_positioned.astype(np.float32),
        base=inputs[:, : len(VM_BASE_COLUMNS)],
        served=inputs,
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
