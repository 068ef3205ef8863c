"""The shadow precompute: while a challenger chain with a new embedding version awaits promotion, each hourly
run also writes its tiers (the champion's selected pairs embedded by the challenger's FM and AE, its
aggregates, neighbours and A2A lists), so at promotion the new VM finds them filled instead of starting cold.

The shadow steps are the champion's nodes run on :meth:`~.spec.HourRun.as_shadow`; their counts and figures
carry the ``shadow_`` prefix, so the run record shows what the shadow cost. :func:`shadow_gate` ends the run:
once the shadow has been written ``shadow_hours`` it compares both chains' coverage of the hour past and
promotes or refuses the challenger (:func:`solaris.training.gate.shadow_gate`).
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from solaris.config import Settings
from solaris.data.hourly import HOUR
from solaris.precompute import quality
from solaris.precompute.pipeline import HOUR_COUNTS, SHADOW
from solaris.precompute.quality_nodes import summed
from solaris.precompute.run_files import Meta, step_staging, timed
from solaris.precompute.spec import HourRun
from solaris.store import open_configured_store

Node = Callable[..., Meta]
UNPREFIXED = ("seconds", "rows", "shard")  # what every step reports, shadow or not
ALL_TIERS = "coverage_any"


def shadowed(node: Node) -> Node:
    """``node`` run as the shadow chain, its counts prefixed; a no-op for a run without one."""

    @functools.wraps(node)
    def step(run: HourRun, settings: Settings, *shard: int) -> Meta:
        if run.shadow is None:
            return {"seconds": 0.0}
        return prefixed(node(run.as_shadow(), settings, *shard))

    step.__name__ = step.__qualname__ = SHADOW + node.__name__
    return step


def prefixed(meta: dict[str, Any]) -> Meta:
    return {key if key in UNPREFIXED else SHADOW + key: value for key, value in meta.items()}


def shadow_coverage(run: HourRun, settings: Settings) -> Meta:
    """The shadow chain's coverage of the hour past per tier, as if it had served it, before it writes this
    hour, from the counts ``hour_counts`` staged for it; added to the figures the run record holds (a rerun
    reuses those, as :func:`.quality_nodes.coverage` does)."""
    if run.shadow is None:
        return {"seconds": 0.0}
    with timed({}) as meta, open_configured_store(settings) as store:
        recorded = store.get_run(run.run_key)
        figures = dict(recorded.figures) if recorded is not None else {}
        if own := {k: v for k, v in figures.items() if k.startswith(SHADOW)}:
            meta |= own
        else:
            stage = step_staging(settings, run, "shadow_coverage")
            counts = summed(stage.read(HOUR_COUNTS, columns=[SHADOW + key for key in quality.COVERAGE_COUNTS]))
            found = quality.coverage_shares({key.removeprefix(SHADOW): value for key, value in counts.items()})
            meta |= prefixed(found)
            store.record_run_figures(run.run_key, figures | prefixed(found))
    return meta


def shadow_gate(run: HourRun, settings: Settings) -> Meta:
    """After ``shadow_hours`` hours of shadow writes (this one included), promote the challenger if its
    all-tier coverage of the hour past is within the gate's margin of the champion's, else refuse it.
    Promoted at the end of the run, it serves the next hour from tiers this run already wrote."""
    from solaris.tracking import registry
    from solaris.tracking.promotion import shadow_gate as decide
    from solaris.tracking.registry import PinnedVersions

    if run.shadow is None:
        return {"seconds": 0.0}
    with timed({}) as meta, open_configured_store(settings) as store:
        since = store.get_embedding_version(run.shadow.embedding_version).created_at
        hours = (run.interval_start - since) // HOUR + 1
        meta["shadow_hours_written"] = hours
        if hours >= run.params.shadow_hours:
            recorded = store.get_run(run.run_key)
            figures = recorded.figures if recorded is not None else {}
            if ALL_TIERS not in figures or SHADOW + ALL_TIERS not in figures:
                raise ValueError(
                    f"run {run.run_key} has no {ALL_TIERS} figures for both chains: the gate cannot compare them"
                )
            s = run.shadow
            decision = decide(
                registry.connect(settings),
                settings,
                PinnedVersions(run.fm_version, run.ae_version, run.vm_version, run.embedding_version, run.vm_name),
                PinnedVersions(s.fm_version, s.ae_version, s.vm_version, s.embedding_version, run.vm_name),
                figures[ALL_TIERS],
                figures[SHADOW + ALL_TIERS],
                hours,
            )
            meta["shadow_promoted"] = int(decision.promoted)
    return meta
