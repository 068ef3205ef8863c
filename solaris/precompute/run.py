"""One hourly precompute run without Airflow: the declared pipeline's nodes, in order, in this process.

The replay harness and tests use it; the DAG is built from the same declaration (:mod:`.pipeline`), with
retries, pools and a shard fan-out.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from datetime import UTC, datetime
from typing import Any

from solaris.config import Settings
from solaris.precompute import nodes
from solaris.precompute.pipeline import PRECOMPUTE
from solaris.precompute.run_files import shard_count
from solaris.precompute.spec import HourRun

Clock = Callable[[], datetime]
StepCall = Callable[[str, int | None], dict[str, Any]]  # (step name, shard) -> the step's output


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
    """Precompute for ``[floor_hour(data_interval_end), +1 h)``; returns what the DAG's last task returns, or
    for an hour with nothing to precompute the reason, under ``skipped``, and no counts."""
    return run_resolved(settings, nodes.resolve(settings, data_interval_end, params, clock()), clock=clock)


def call_node(run: HourRun, settings: Settings, step: str, shard: int | None) -> dict[str, Any]:
    """The declared step's code for the run (and the shard, for a mapped step), in this process."""
    node = PRECOMPUTE.step(step).code()
    return node(run, settings) if shard is None else node(run, settings, shard)


def run_resolved(
    settings: Settings, resolved: dict[str, Any], *, clock: Clock = wall_clock, call: StepCall | None = None
) -> dict[str, Any]:
    """Every declared step after ``resolve``, in declaration order, with the versions it pinned; ``call``
    runs one step (default: :func:`call_node` in this process; a benchmark runs each in a process of its own).

    A failure marks the run record failed and re-raises; the staging stays, as it does for an Airflow retry.
    A step that finds nothing to precompute ends the run, its record skipped, as the DAG skips the steps after it.
    """
    run = nodes.hour_run(resolved)
    call = call or (lambda step, shard: call_node(run, settings, step, shard))
    try:
        outputs: dict[str, Any] = {}
        for step in PRECOMPUTE.steps:
            if step.mapped_over is not None:
                shards = range(shard_count(run, step.mapped_over))
                outputs[step.name] = [call(step.name, shard) for shard in shards]
            else:
                outputs[step.name] = call(step.name, None)
        return nodes.finish(run, settings, resolved, outputs, clock())
    except nodes.NothingToPrecompute as nothing:
        nodes.skip(run, settings, clock())
        return {"run_key": run.run_key, "skipped": str(nothing), "counts": {}, "timings": {}, "quality": {}}
    except Exception:
        nodes.fail(run, settings, clock())
        raise
