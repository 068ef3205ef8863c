"""``generate_world``: run a simulator hour by hour into an atomically built event log."""

from __future__ import annotations

from dataclasses import asdict
from datetime import timedelta
from pathlib import Path
from typing import Any

from tqdm import tqdm

from solaris.data import hourly
from solaris.data.eventlog import EventLog, building, finish_event_log
from solaris.data.synthetic.config import WorldConfig
from solaris.data.synthetic.simulate import Simulator
from solaris.data.synthetic.stats import WorldStats

PART = "part-0"


def generate_world(config: WorldConfig, target_dir: Path, overwrite: bool = False, progress: bool = False) -> EventLog:
    """Generate ``config``'s world into ``target_dir``, writing each hour as it is simulated.

    Memory holds the population, per-user state and one hour of traffic, never the whole log.

    The log appears only once complete (built in a temporary sibling, then renamed); on any error the previous
    content of ``target_dir``, if any, is left as it was.
    """
    target = Path(target_dir)
    with building(target, overwrite) as folder:
        simulator = Simulator(config)
        stats = WorldStats.empty(config.n_items)
        batches = tqdm(simulator.hours(), total=config.hours, unit="h", desc=config.name, disable=not progress)
        for batch in batches:
            hourly.write_hourly(batch.requests_table(), folder / "requests", PART)
            hourly.write_hourly(batch.impressions_table(), folder / "impressions", PART)
            stats.add(batch)
        meta = _meta(config, target.name, stats)
        finish_event_log(folder, simulator.users.table, simulator.items.table, meta, stats.counts())
    return EventLog(target)


def _meta(config: WorldConfig, name: str, stats: WorldStats) -> dict[str, Any]:
    end = config.start + timedelta(hours=config.hours)
    return {
        "name": name,
        "source": "synthetic",
        "preset": config.name,
        "seed": config.seed,
        "config": {**asdict(config), "start": config.start.isoformat()},
        "start": config.start.isoformat(),
        "end": end.isoformat(),
        "hours": config.hours,
        **stats.summary(),
    }
