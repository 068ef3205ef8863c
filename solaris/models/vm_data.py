"""VM examples for a span, with the FM-derived inputs as they would have been served at each impression.

- pair tier: the AE code of the FM embedding of (user, item) as the precompute makes it (history before the
  impression's hour, position 0), from an FM that never trained on these hours; the distillation target is
  the FM's probability as of the impression itself. A served code may be older: written up to
  ``served_age_hours - 1`` hours before and still fresh, so validation and the gate see codes of that age;
- label: the impression's click or conversion, by the VM's declaration (:mod:`solaris.vms`), with the FM's
  matching head as the distillation target; one teacher pass serves every VM (:meth:`VMData.for_vm`);
- agg tier: the mean of the user's pair codes over the 24 hours before the impression (flag 0 if none);
- exposure counters: the user's and the pair's impressions per window as of the impression's hour start,
  as the store serves them (every variant sees them);
- the neighbour (knn) and similar-item (a2a) tiers: zeros and flag 0 here; a VM learns them from the replay's
  or production's served rows, which hold every tier as served.
Training masks a random share of pair codes (``VMConfig.coverage``) so one model learns every tier; validation
and the gate score a fixed share of rows with pair codes as old as serving has them (:meth:`VMData.served_like`).
VM spans are the recent hours, small next to the FM's: they are built once, streamed hour block by block.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, fields, replace
from datetime import timedelta

import numpy as np
import pyarrow as pa

from solaris.data.eventlog import EventLog
from solaris.embedding_version import check_ae_fm, check_embedding_version, embedding_version
from solaris.models.autoencoder import Autoencoder, compress
from solaris.models.features import (
    US_PER_HOUR,
    HistoryIndex,
    fm_matrix,
    hour_start_matrix,
    pair_key,
    segment_searchsorted,
    ts_micros,
    vm_base_matrix,
)
from solaris.models.fm import FoundationModel, embed
from solaris.models.loader import stream_impressions
from solaris.models.splits import Span
from solaris.models.vm import TIERS, VMConfig
from solaris.vms import LABELS, VMSpec

AGG_WINDOW = timedelta(hours=24)
# The pair tier's share of served rows (45-60% on the default world): what validation and the gate see.
SERVED_PAIR_COVERAGE = 0.5


@dataclass(frozen=True)
class Teacher:
    """The FM and AE whose outputs feed a VM; refuses an AE trained on another FM version."""

    fm: FoundationModel
    ae: Autoencoder
    fm_version: str
    ae_version: str
    device: str = "auto"

    def __post_init__(self) -> None:
        check_ae_fm(self.ae_version, self.ae.config.fm_version, self.fm_version)

    @property
    def embedding_version(self) -> str:
        return embedding_version(self.fm_version, self.ae_version, self.ae.config.code_dim)

    def codes(self, embeddings: np.ndarray) -> np.ndarray:
        return compress(self.ae, embeddings)


@dataclass(frozen=True)
class VMData:
    base: np.ndarray  # (n, 10) float32, features.VM_BASE_COLUMNS: what every variant sees
    labels: np.ndarray  # (n, 2) float32 in vms.LABELS order: click, conversion
    fm_probs: np.ndarray  # (n, 2) the FM's heads, same order
    position: np.ndarray  # (n,) int64: the slot the impression was shown in
    pair: np.ndarray  # (n, code_dim) as of the impression's hour start
    agg: np.ndarray  # (n, code_dim)
    agg_flag: np.ndarray  # (n,)
    embedding_version: str
    pair_served: np.ndarray  # (n, code_dim) as of the hour a fresh code served then was written (see age_hours)
    head: int  # which label this VM learns (vms.VMSpec.head); 0, click, until narrowed by for_vm

    def __len__(self) -> int:
        return int(self.position.size)

    @property
    def label(self) -> np.ndarray:
        return self.labels[:, self.head]

    @property
    def fm_target(self) -> np.ndarray:
        """The FM head matching the label: the distillation target."""
        return self.fm_probs[:, self.head]

    def for_vm(self, spec: VMSpec) -> VMData:
        """The examples ``spec`` learns from: its label, and only the positions it serves (a view of these
        arrays when it serves every position)."""
        if spec.positions is None:
            return replace(self, head=spec.head)
        keep = (self.position >= spec.positions[0]) & (self.position <= spec.positions[1])
        if not keep.any():
            raise ValueError(f"VM {spec.describe()}: no impressions at those positions")
        rows = {f.name: getattr(self, f.name) for f in fields(self) if f.name not in ("embedding_version", "head")}
        return VMData(**{k: v[keep] for k, v in rows.items()}, embedding_version=self.embedding_version, head=spec.head)

    def matrix(self, config: VMConfig, pair_flag: np.ndarray | None = None, served: bool = False) -> np.ndarray:
        """The VM's input matrix; ``pair_flag`` (default all present) masks pair codes to zeros; ``served``
        takes the pair codes as old as serving has them."""
        flag = np.ones(len(self), np.float32) if pair_flag is None else pair_flag.astype(np.float32)
        absent = (np.zeros_like(self.pair), np.zeros(len(self), np.float32))
        pair = self.pair_served if served else self.pair
        tiers = {tier: absent for tier in TIERS} | {"pair": (pair, flag), "agg": (self.agg, self.agg_flag)}
        return vm_inputs(config, self.embedding_version, self.base, tiers)

    def served_like(self, config: VMConfig) -> np.ndarray:
        """The VM's inputs with pair codes on a fixed :data:`SERVED_PAIR_COVERAGE` share of rows, the same
        rows for every model scored on these examples, each code as old as serving has it. Early stopping and
        the promotion gate score these: a VM chosen on 100% fresh pair codes is chosen for inputs serving never
        gives it."""
        present = np.random.default_rng(0).random(len(self)) < SERVED_PAIR_COVERAGE
        return self.matrix(config, present, served=True)

    def targets(self, config: VMConfig) -> np.ndarray:
        if not config.distills:
            return self.label
        return ((1 - config.distill_alpha) * self.label + config.distill_alpha * self.fm_target).astype(np.float32)


def vm_inputs(
    config: VMConfig, version: str, base: np.ndarray, tiers: Mapping[str, tuple[np.ndarray, np.ndarray]]
) -> np.ndarray:
    """The VM's input matrix from base columns and (codes, presence flags) per tier: what the ranker builds
    from the store's reads. Absent codes are zeroed; embeddings of another version are refused."""
    if not config.uses_embeddings:
        return base.astype(np.float32)
    check_embedding_version(config.embedding_version, version, f"VM {config.variant}")
    blocks = [base]
    for tier in TIERS:
        codes, flags = tiers[tier]
        flags = np.asarray(flags, np.float32)
        blocks += [codes * flags[:, None], flags[:, None]]
    return np.concatenate(blocks, axis=1, dtype=np.float32)


def build_vm_data(
    log: EventLog, span: Span, index: HistoryIndex, teacher: Teacher, served_age_hours: int, block_hours: int = 6
) -> VMData:
    """VM examples of ``span`` in time order, teacher outputs computed over the span plus 24 h before it."""
    return build_vm_datasets(log, {"span": span}, index, teacher, served_age_hours, block_hours)["span"]


def build_vm_datasets(
    log: EventLog,
    spans: Mapping[str, Span],
    index: HistoryIndex,
    teacher: Teacher,
    served_age_hours: int,
    block_hours: int = 6,
) -> dict[str, VMData]:
    """Several spans from one teacher pass over their union (adjacent spans share their 24 h lookbacks).
    ``served_age_hours``: how long a served pair code stays fresh (the precompute's ``ttl_hours``)."""
    first, last = min(s.start for s in spans.values()), max(s.end for s in spans.values())
    parts = []
    for table in stream_impressions(log, Span(max(first - AGG_WINDOW, log.start), last), block_hours):
        n = teacher.fm.config.history
        target = embed(teacher.fm, fm_matrix(table, index, n), device=teacher.device).probs
        served = teacher.codes(embed(teacher.fm, hour_start_matrix(table, index, n), device=teacher.device).embedding)
        aged = served
        if served_age_hours > 1:
            ages = age_hours(table, served_age_hours)
            aged = embed(teacher.fm, hour_start_matrix(table, index, n, ages), device=teacher.device).embedding
            aged = teacher.codes(aged)
        parts.append(_teacher_columns(table, target, served, aged))
    every = {k: np.concatenate([p[k] for p in parts]) for k in parts[0]} if parts else {"ts": np.zeros(0, int)}
    return {name: _select(every, span, index, teacher.embedding_version) for name, span in spans.items()}


def age_hours(table: pa.Table, served_age_hours: int) -> np.ndarray:
    """How old each impression's pair code is when served: a pair is re-embedded once its code expires, so
    its code's age runs 0, 1, ..., ``served_age_hours - 1`` and starts over, at a phase of its own (a hash of
    the pair, so champion and challenger, and a rerun, see the same ages)."""
    keys = pair_key(table["user_id"].to_numpy().astype(np.int64), table["item_id"].to_numpy().astype(np.int64))
    hours = ts_micros(table["ts"]) // US_PER_HOUR
    return (keys % 1_000_003 + hours) % served_age_hours  # a prime modulus mixes the user into the phase


def _select(every: dict[str, np.ndarray], span: Span, index: HistoryIndex, version: str) -> VMData:
    micros = [int(t.timestamp() * 1_000_000) for t in (span.start, span.end)]
    in_span = (every["ts"] >= micros[0]) & (every["ts"] < micros[1])
    if not in_span.any():
        raise ValueError(f"no impressions in {span}: cannot build VM examples")
    agg, agg_flag = user_aggregate(every["user"], every["ts"], every["code"], in_span)
    rows = {k: v[in_span] for k, v in every.items()}
    return VMData(
        base=vm_base_matrix(
            rows["user"],
            rows["item"],
            rows["ts"],
            rows["position"],
            index.served_exposure(rows["user"], rows["item"], rows["ts"]),
        ),
        labels=rows["labels"],
        fm_probs=rows["fm_probs"],
        position=rows["position"],
        pair=rows["code"],
        agg=agg,
        agg_flag=agg_flag,
        embedding_version=version,
        pair_served=rows["aged_code"],
        head=0,
    )


def _teacher_columns(
    table: pa.Table, fm_probs: np.ndarray, code: np.ndarray, aged_code: np.ndarray
) -> dict[str, np.ndarray]:
    return {
        "user": table["user_id"].to_numpy().astype(np.int64),
        "item": table["item_id"].to_numpy().astype(np.int64),
        "ts": ts_micros(table["ts"]),
        "position": table["position"].to_numpy().astype(np.int64),
        "labels": np.stack([table[label].to_numpy() for label in LABELS], axis=1).astype(np.float32),
        "fm_probs": fm_probs.astype(np.float32),
        "code": code.astype(np.float32),
        "aged_code": aged_code.astype(np.float32),
    }


def user_aggregate(
    users: np.ndarray, ts: np.ndarray, codes: np.ndarray, targets: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """For each target row: mean code of the same user's rows in [ts - 24 h, ts), by prefix sums."""
    order = np.lexsort((ts, users))
    s_user, s_ts = users[order], ts[order]
    prefix = np.concatenate([np.zeros((1, codes.shape[1])), np.cumsum(codes[order], axis=0, dtype=np.float64)])
    q_user, q_ts = users[targets], ts[targets]
    seg_lo = np.searchsorted(s_user, q_user, side="left")
    seg_hi = np.searchsorted(s_user, q_user, side="right")
    window_us = int(AGG_WINDOW.total_seconds() * 1_000_000)
    lo = segment_searchsorted(s_ts, seg_lo, seg_hi, q_ts - window_us)
    hi = segment_searchsorted(s_ts, seg_lo, seg_hi, q_ts)
    count = (hi - lo).astype(np.float64)
    mean = (prefix[hi] - prefix[lo]) / np.maximum(count, 1)[:, None]
    return mean.astype(np.float32), (count > 0).astype(np.float32)
