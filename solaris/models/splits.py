"""The time split every model comparison uses: FM-train, VM-train, validation and held-out evaluation hours.

The FM never trains on VM-train hours, so the FM embeddings and probabilities a VM learns from there are
out-of-sample, as they would be when served. Every VM variant trains on the same VM-train hours (equal
freshness), every model early-stops on the same validation hours, and all are scored on the same held-out
evaluation hours.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

import numpy as np

from solaris.data.eventlog import EventLog
from solaris.data.hourly import HOUR

SPLITS = ("fm_train", "vm_train", "valid", "eval")
DEFAULT_FRACTIONS = (0.55, 0.25, 0.08, 0.12)


@dataclass(frozen=True)
class Span:
    start: datetime
    end: datetime

    @property
    def hours(self) -> int:
        return int((self.end - self.start) / HOUR)

    def __str__(self) -> str:
        return f"{self.start.isoformat()}/{self.end.isoformat()}"


@dataclass(frozen=True)
class TimeSplit:
    fm_train: Span
    vm_train: Span
    valid: Span
    eval: Span

    @classmethod
    def from_log(cls, log: EventLog, fractions: tuple[float, ...] = DEFAULT_FRACTIONS) -> TimeSplit:
        return cls.from_hours(log.hours(), fractions, str(log.root))

    @classmethod
    def from_hours(cls, hours: list[datetime], fractions: tuple[float, ...], what: str = "span") -> TimeSplit:
        """Split consecutive ``hours`` by ``fractions`` (a replay splits only its training span)."""
        if len(fractions) != len(SPLITS) or any(f <= 0 for f in fractions):
            raise ValueError(f"split fractions {fractions} must be {len(SPLITS)} positive shares")
        if len(hours) < len(SPLITS):
            raise ValueError(f"{what} spans {len(hours)} hours; a time split needs {len(SPLITS)}")
        shares = np.cumsum(fractions)[:-1] / sum(fractions)
        edges = [0]
        for k, share in enumerate(shares):
            # Every split keeps at least one hour, whatever the rounding.
            highest = len(hours) - (len(SPLITS) - 1 - k)
            edges.append(min(max(round(share * len(hours)), edges[-1] + 1), highest))
        marks = [*hours, hours[-1] + HOUR]
        bounds = [marks[e] for e in [*edges, len(hours)]]
        return cls(*(Span(a, b) for a, b in zip(bounds[:-1], bounds[1:], strict=True)))

    def as_params(self) -> dict[str, str]:
        return {f"split_{name}": str(getattr(self, name)) for name in SPLITS}
