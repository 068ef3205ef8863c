"""One hourly precompute run without Airflow: the DAG's nodes called in the DAG's order, in this process.

The replay harness and tests use it; the DAG is the same sequence with retries, pools and a shard fan-out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from solaris.config import Settings
from solaris.precompute import nodes

Clock = Callable[[], datetime]


def wall_clock() -> datetime:
    """The stamp for the run record's started/finished times: when it ran, not what it computed (a replay
    passes its own clock)."""
    return datetime.now(UTC)


def run_hour(
    settings: Settings,
    data_interval_end: datetime,
    params: Mapping[str, Any] | None = None,
    *,
    clock: Clock = wall_clock,
) -> dict[str, Any]:
    """Precompute for ``[floor_hour(data_interval_end), +1 h)``; returns what the DAG's last task returns."""
    return run_resolved(settings, nodes.resolve(settings, data_interval_end, params, clock()), clock=clock)


def run_resolved(settings: Settings, resolved: dict[str, Any], *, clock: Clock = wall_clock) -> dict[str, Any]:
    """Every step after ``resolve``, with the versions it pinned.

    A failure marks the run record failed and re-raises; the staging stays, as it does for an Airflow retry.
    """
    run = nodes.hour_run(resolved)
    try:
        steps = {
            "coverage": nodes.coverage(run, settings),
            "candidates": nodes.candidates(run, settings),
            "select": nodes.select(run, settings),
        }
        shards = [nodes.embed_shard(run, settings, shard) for shard in range(run.params.shards)]
        for name, node in (
            ("write", nodes.write_pairs),
            ("aggregates", nodes.aggregates),
            ("neighbours", nodes.neighbours),
            ("expire", nodes.expire),
        ):
            steps[name] = node(run, settings)
        return nodes.finish(run, settings, resolved, steps, shards, clock())
    except Exception:
        nodes.fail(run, settings, clock())
        raise
