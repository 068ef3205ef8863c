"""A span's served events: its impressions (the labelled pairs), the FM's probability for each, and the VM
inputs exactly as the ranker served them, read back from the features-as-served log.

Every model is scored on the same rows. The FM's inputs are built as of each impression (history strictly
before it) and the FM never trained on these hours, so nothing here has seen its label.

One VM's events hold its own label and the FM's matching head (:mod:`solaris.vms`), on the positions it
serves. Every VM reads the same table, so the tier inputs served to the lead at an impression are what any VM
was served there: one read of the log and one FM pass give every VM's events.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog
from solaris.models.features import US_PER_HOUR, VM_BASE_COLUMNS, HistoryIndex, fm_matrix, hour_start_matrix, ts_micros
from solaris.models.fm import FoundationModel, embed
from solaris.models.splits import Span
from solaris.serving.served_rows import joined, served_matrix
from solaris.vms import VMSpec

SERVED_COLUMNS = ["request_id", "ts", "user_id", "item_id", "position"]
FM_PROBS = ("fm_prob", "fm_prob_hourly", "fm_prob_hourly_positioned")  # the FM's probabilities an event holds


@dataclass(frozen=True)
class ServedEvents:
    label: np.ndarray  # (n,) float32: the VM's label (click or conversion)
    fm_prob: np.ndarray  # (n,) the FM head of that label, from the history strictly before the impression
    fm_prob_hourly: np.ndarray  # (n,) the same as the precompute computes it: as of the hour's start, position 0
    fm_prob_hourly_positioned: np.ndarray  # (n,) the same at the impression's position: an ablation
    base: np.ndarray  # (n, 10) the base VM's inputs as served: ids, hour, position, counters
    served: np.ndarray  # (n, 10 + 4 * (code_dim + 1)) the SOLARIS VM's inputs as served
    tiers: np.ndarray  # (n,) int8 tier that fed each row
    hours: np.ndarray  # (n,) int64 hour index since the epoch, to split a span by time
    requests: np.ndarray  # (n,) int64 request id, the bootstrap's unit (a row without one is its own request)

    def __len__(self) -> int:
        return int(self.label.size)

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
    vms: Sequence[VMSpec],
) -> dict[str, ServedEvents]:
    """Each VM's events of the span: its impressions joined to what was served for each (by request and
    item); every row must have been served with ``embedding_version``, since a VM may only ever be fed the
    codes of its own version."""
    shown, served = joined(log, span, served_dir, embedding_version, code_dim)
    history = fm.config.history
    fm_probs = embed(fm, fm_matrix(shown, index, history), device=device).probs
    hourly = embed(fm, hour_start_matrix(shown, index, history), device=device).probs
    positioned = embed(fm, hour_start_matrix(shown, index, history, at_position=True), device=device).probs
    inputs = served_matrix(shown, served)
    common = {
        "base": inputs[:, : len(VM_BASE_COLUMNS)],
        "served": inputs,
        "tiers": served["tier"].to_numpy().astype(np.int8),
        "hours": ts_micros(shown["ts"]) // US_PER_HOUR,
        "requests": _request_ids(shown),
    }
    position = shown["position"].to_numpy()
    found = {}
    for spec in vms:
        own = ServedEvents(
            label=shown[spec.label].to_numpy().astype(np.float32),
            fm_prob=fm_probs[:, spec.head].astype(np.float32),
            fm_prob_hourly=hourly[:, spec.head].astype(np.float32),
            fm_prob_hourly_positioned=positioned[:, spec.head].astype(np.float32),
            **common,
        )
        if spec.positions is not None:
            own = own.select((position >= spec.positions[0]) & (position <= spec.positions[1]))
        found[spec.name] = own
    return found


def hour_index(hour: datetime) -> int:
    """The hour as :attr:`ServedEvents.hours` counts it (hours since the epoch)."""
    return int(hour.timestamp()) // 3600


def _request_ids(table: pa.Table) -> np.ndarray:
    """Request ids as int64; a row without one gets a negative id of its own (no request is shared)."""
    column = table["request_id"]
    ids = pc.fill_null(column, 0).to_numpy().astype(np.int64)
    missing = pc.is_null(column).to_numpy(zero_copy_only=False)
    ids[missing] = -1 - np.flatnonzero(missing)
    return ids
