"""What a pair code is worth, per fallback (what the user has without it), estimated from features as served.

On every served row fed by the user's own pair code, the serving VM's log loss as served is compared with its
loss on the same row with the pair code taken away (its block zeroed, its flag 0: exactly what the VM sees when
the pair tier misses), the lower tiers left as they were. The mean difference per fallback (the user had an
aggregate or not) is the pair code's expected gain there: one model, the same rows, no confounding by which
pairs happened to be precomputed. A new user's cohort code also fills the pair input, but it is not what the
selector buys: counted, those rows (new users, no aggregate) price the no-aggregate fallback at a cohort code's
gain, 20x below the aggregate fallback's on default seed 0, and the selector starves users without one.

One table serves every VM, so a pair code is worth what it gains all of them: :func:`consumers_gains` sums
each fallback's gain over the VMs that measured one (each on its own label, in the same unit, nats per row).
"""

from __future__ import annotations

from collections.abc import Mapping
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from solaris.data.eventlog import EventLog
from solaris.enrichment.tiers import TIER_NAMES
from solaris.models.demand import FALLBACKS
from solaris.models.splits import Span
from solaris.models.vm import VerticalModel, score, tier_columns
from solaris.serving.served_rows import joined, served_matrix

EPS = 1e-7
MIN_ROWS = 200  # fewer pair-fed rows for a fallback than this: its gain is not estimated (the other's is used)


def _log_loss(label: np.ndarray, p: np.ndarray) -> np.ndarray:
    p = np.clip(p, EPS, 1 - EPS)
    return -(label * np.log(p) + (1 - label) * np.log(1 - p))


def fallback_gains(vm: VerticalModel, served: np.ndarray, label: np.ndarray, own_pair: np.ndarray) -> dict[str, float]:
    """Mean log-loss gain of the pair code per fallback (keys of :data:`FALLBACKS`) over the rows ``own_pair`` marks
    (fed by the user's own pair code), floored at a small positive value so that a fallback is never worth
    nothing; ``{}`` when no fallback has enough such rows."""
    dim = vm.config.code_dim
    pair, agg = tier_columns(dim, "pair"), tier_columns(dim, "agg")
    fed = own_pair & (served[:, pair.stop - 1] > 0)
    without = served[fed].copy()
    without[:, pair] = 0.0
    gain = _log_loss(label[fed], score(vm, without)) - _log_loss(label[fed], score(vm, served[fed]))
    has_aggregate = served[fed, agg.stop - 1] > 0
    found = {}
    for fallback, rows in zip(FALLBACKS, (has_aggregate, ~has_aggregate), strict=True):
        if rows.sum() >= MIN_ROWS:
            found[fallback] = max(float(gain[rows].mean()), 1e-4)
    if len(found) == 1:  # the missing fallback is weighed like the one measured
        found[next(f for f in FALLBACKS if f not in found)] = next(iter(found.values()))
    return found


def served_gains(
    log: EventLog, served_dir: Path, vm: VerticalModel, label: str, until: datetime, hours: int = 24
) -> dict[str, float]:
    """:func:`fallback_gains` on the features served in the ``hours`` before ``until`` with ``vm``'s embedding
    version, against the impressions' ``label`` (the VM's, :mod:`solaris.vms`); impressions without a served
    row are left out; ``{}`` when nothing was served."""
    span = Span(until - timedelta(hours=hours), until)
    if not Path(served_dir).is_dir():
        return {}
    shown, served = joined(
        log, span, served_dir, vm.config.embedding_version, vm.config.code_dim, every_impression=False
    )
    if not shown.num_rows:
        return {}
    own_pair = served["tier"].to_numpy() == TIER_NAMES.index("pair")
    return fallback_gains(vm, served_matrix(shown, served), shown[label].to_numpy().astype(np.float32), own_pair)


def consumers_gains(per_vm: Mapping[str, Mapping[str, float]]) -> dict[str, float]:
    """Each fallback's gain summed over the VMs that measured it; ``{}`` when none did."""
    summed: dict[str, float] = {}
    for gains in per_vm.values():
        for fallback, gain in gains.items():
            summed[fallback] = summed.get(fallback, 0.0) + gain
    return summed
