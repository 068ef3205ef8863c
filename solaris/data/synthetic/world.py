"""``generate_world``: run a simulator hour by hour into an atomically built event log."""

from __future__ import annotations

import tempfile
from dataclasses import asdict, replace
from datetime import timedelta
from itertools import islice
from pathlib import Path
from typing import Any

from tqdm import tqdm

from solaris.data import hourly
from solaris.data.eventlog import EventLog, building, finish_event_log, refuse_existing
from solaris.data.plain import import_plain
from solaris.data.synthetic.config import WorldConfig
from solaris.data.synthetic.simulate import HourBatch, Simulator
from solaris.data.synthetic.stats import WorldStats

PART = "part-0"


def generate_world(
    config: WorldConfig, target_dir: Path, overwrite: bool = False, progress: bool = False, hours: int | None = None
) -> EventLog:
    """Generate ``config``'s world into ``target_dir``, writing each hour as it is simulated.

    Memory holds the population, per-user state and one hour of traffic, never the whole log. ``hours``
    writes only the first hours of the world (its population still spans all of ``config.hours``): the rest
    is left for live traffic to continue (:mod:`solaris.live.traffic`).

    The log appears only once complete (built in a temporary sibling, then renamed); on any error the previous
    content of ``target_dir``, if any, is left as it was. A ``plain`` config's world is written as a plain log
    and imported (:func:`generate_plain_world`).
    """
    if config.plain:
        return generate_plain_world(config, target_dir, overwrite, progress, hours)
    written = config.hours if hours is None else hours
    if not 1 <= written <= config.hours:
        raise ValueError(f"hours={hours} must lie in [1, {config.hours}], the world's span")
    target = Path(target_dir)
    with building(target, overwrite) as folder:
        simulator = Simulator(config)
        stats = WorldStats.empty(config.n_items)
        batches = tqdm(
            islice(simulator.hours(), written), total=written, unit="h", desc=config.name, disable=not progress
        )
        for batch in batches:
            write_hour(folder, batch)
            stats.add(batch)
        meta = world_meta(config, target.name, stats, written)
        finish_event_log(folder, simulator.users.table, simulator.items.table, meta, stats.counts())
    return EventLog(target)


def generate_plain_world(
    config: WorldConfig, target_dir: Path, overwrite: bool = False, progress: bool = False, hours: int | None = None
) -> EventLog:
    """The world simulated, then written as a team's plain log and imported (:mod:`solaris.data.plain`), both
    in a hidden sibling of ``target_dir`` (the same disk) that is removed afterwards. A prefix (``hours``) is
    refused: an imported log has no simulator for live traffic to continue."""
    if hours is not None:
        raise ValueError(f"hours={hours}: a plain world is an imported log, which live traffic cannot continue")
    target = Path(target_dir)
    refuse_existing(target, overwrite)  # before minutes of simulating
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory(prefix=f".{target.name}.", suffix=".plain", dir=target.parent) as work:
        simulated = generate_world(replace(config, plain=False), Path(work) / "simulated", progress=progress)
        origin = f"synthetic world {config.name} (seed {config.seed}), exported plain"
        return import_plain(simulated, target, Path(work), origin=origin, overwrite=overwrite)


def write_hour(folder: Path, batch: HourBatch) -> None:
    hourly.write_hourly(batch.requests_table(), folder / "requests", PART)
    hourly.write_hourly(batch.impressions_table(), folder / "impressions", PART)


def world_meta(config: WorldConfig, name: str, stats: WorldStats, hours: int) -> dict[str, Any]:
    """meta.json of a world whose first ``hours`` hours are written (``horizon_hours``: all it can have)."""
    end = config.start + timedelta(hours=hours)
    return {
        "name": name,
        "source": "synthetic",
        "preset": config.name,
        "seed": config.seed,
        "config": {**asdict(config), "start": config.start.isoformat()},
        "start": config.start.isoformat(),
        "end": end.isoformat(),
        "hours": hours,
        "horizon_hours": config.hours,
        **stats.summary(),
    }
