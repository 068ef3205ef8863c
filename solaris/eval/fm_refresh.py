"""The FM's cadence inside a replay: the hours a new embedding version starts serving, and the switch at each.

The last refresh falls one cadence before the evaluation span (the version that serves it has served a whole
cadence first, as production's would have), earlier ones a cadence apart, none in the logging span's first
hours (the training span's version serves them). Every VM variant is then refreshed only on what the last
version served, so no VM is ever fed another version's codes.

A switch goes as in production: the new version is trained at its refresh hour on the hours before it, the
hourly precompute writes it in shadow for ``shadow_hours``, and the shadow gate at the end of the last of
those hours promotes it (:mod:`solaris.precompute.shadow`), or refuses it and the old one serves on.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path

from solaris.config import Settings
from solaris.data.hourly import HOUR
from solaris.eval.protocol import FM_REFRESH_HOURS, check_fm_refresh
from solaris.eval.spans import ReplaySpans
from solaris.serving.champion import ServingModel, load_serving_model
from solaris.tracking import registry
from solaris.tracking.promotion import await_shadow
from solaris.training.jobs import Trained, TrainPlan, TrainReport, World
from solaris.training.refresh import refresh_ae, refresh_fm, register_successor_vm

FIRST_VERSION_MIN_HOURS = 4  # the training span's version serves at least these logging hours
REFRESH_MIN_HOURS = 3  # the last version serves at least these logging hours: the VMs' refresh data


def refresh_hours(spans: ReplaySpans, fm_refresh: str, shadow_hours: int) -> list[datetime]:
    """The hours a refreshed FM is trained at (on the hours before), in order; none for ``fm_refresh="none"``.
    Each version is written in shadow from then and serves ``shadow_hours`` later, once promoted."""
    every = FM_REFRESH_HOURS[check_fm_refresh(fm_refresh)]
    if every is None:
        return []
    if shadow_hours >= every:
        raise ValueError(f"shadow_hours {shadow_hours} must be shorter than the FM's refresh cadence ({every} hours)")
    earliest = spans.logging.start + FIRST_VERSION_MIN_HOURS * HOUR
    last = max(spans.eval.start - every * HOUR, earliest)
    if spans.eval.start - last - shadow_hours * HOUR < REFRESH_MIN_HOURS * HOUR:
        raise ValueError(
            f"the logging span ({spans.logging.hours} hours) is too short for an FM refresh: it needs "
            f"{FIRST_VERSION_MIN_HOURS + shadow_hours + REFRESH_MIN_HOURS} hours (or fm_refresh 'none')"
        )
    hours = [last]
    while hours[0] - every * HOUR >= earliest:
        hours.insert(0, hours[0] - every * HOUR)
    return hours


@dataclass(frozen=True)
class Chain:
    """One embedding version as the replay serves it: its FM and AE, the VM the ranker and the precompute
    use, and the hour it starts serving."""

    fm: Trained
    ae: Trained
    serving: ServingModel
    first_serving_hour: datetime

    def as_dict(self) -> dict[str, str]:
        return {
            "fm_version": self.fm.version,
            "ae_version": self.ae.version,
            "embedding_version": self.serving.pinned.embedding_version,
            "first_serving_hour": self.first_serving_hour.isoformat(),
        }


def first_chain(settings: Settings, trained: TrainReport, hour: datetime) -> Chain:
    client = registry.connect(settings)
    lead = registry.resolve_champions(client, settings.vms()[0].name)
    return Chain(trained.fm, trained.ae, load_serving_model(client, lead.vm_name, lead.vm), hour)


def start_shadow(
    settings: Settings, log_root: Path, chain: Chain, at: datetime, plan: TrainPlan, valid_hours: int
) -> Chain:
    """Refresh the FM and AE on the hours before ``at`` and make their chain the one written in shadow from
    ``at``; the returned chain serves only once the shadow gate promotes it (:func:`promoted`)."""
    client = registry.connect(settings)
    world = World.open(log_root, plan.fractions, until=at)
    fm = refresh_fm(client, settings, world, chain.fm, at, plan, valid_hours)
    ae = refresh_ae(client, settings, world, fm, chain.ae, at, plan, valid_hours)
    serving = chain.serving.pinned
    successor = register_successor_vm(client, settings, serving.vm_name, serving.vm, fm, ae)
    await_shadow(client, [successor])
    return Chain(fm, ae, load_serving_model(client, successor.vm_name, successor.vm), at)


def promoted(settings: Settings, shadow: Chain, at: datetime) -> Chain | None:
    """The shadow chain serving from ``at`` if the shadow gate made it champion; None if it refused it."""
    champion = registry.resolve_champions(registry.connect(settings), shadow.serving.pinned.vm_name)
    return replace(shadow, first_serving_hour=at) if champion == shadow.serving.pinned else None
