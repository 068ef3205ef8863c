"""A replay's three spans over an event log: train (FM, AE, first-stage VMs), logging (precompute, serve,
log features as served, then refresh every VM), evaluation (the same loop, every model scored)."""

from __future__ import annotations

from dataclasses import dataclass

from solaris.data.eventlog import EventLog
from solaris.models.splits import Span

MIN_HOURS = {"train": 12, "logging": 4, "eval": 2}


@dataclass(frozen=True)
class ReplaySpans:
    train: Span
    logging: Span
    eval: Span

    @classmethod
    def of(cls, log: EventLog, fractions: tuple[float, float, float] = (0.5, 0.3, 0.2)) -> ReplaySpans:
        hours = log.hours()
        if len(fractions) != 3 or any(f <= 0 for f in fractions):
            raise ValueError(f"replay fractions {fractions} must be 3 positive shares (train, logging, eval)")
        total = sum(fractions)
        n_train = round(fractions[0] / total * len(hours))
        n_logging = round(fractions[1] / total * len(hours))
        counts = {"train": n_train, "logging": n_logging, "eval": len(hours) - n_train - n_logging}
        short = {name: n for name, n in counts.items() if n < MIN_HOURS[name]}
        if short:
            needed = ", ".join(f"{name} {MIN_HOURS[name]}" for name in short)
            raise ValueError(
                f"event log {log.root} has {len(hours)} hours: too few for a replay (at least {needed} hours)"
            )
        edges = [hours[0], hours[n_train], hours[n_train + n_logging], log.end]
        return cls(Span(edges[0], edges[1]), Span(edges[1], edges[2]), Span(edges[2], edges[3]))

    def as_dict(self) -> dict[str, str]:
        return {"train": str(self.train), "logging": str(self.logging), "eval": str(self.eval)}
