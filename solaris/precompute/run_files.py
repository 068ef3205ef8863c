"""Where an hourly run keeps its files: its staging folder, the code log, the event log; and the timing and
the degenerate-vector counts the nodes report. Shared by the nodes of :mod:`.nodes` and :mod:`.similarity_nodes`."""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.precompute.codelog import CodeLog
from solaris.precompute.pipeline import FAN_OUTS, PRECOMPUTE, SHADOW
from solaris.precompute.spec import HourRun
from solaris.precompute.staging import Staging, StepStaging

Meta = dict[str, Any]
# Vectors a step left out of the hour, one count per kind on the run record, in MLflow (``count_``) and on the
# health page: a zero or non-finite FM vector has no cosine (``user``: the user KNN, ``item``: the A2A lists),
# and a code the store would refuse, non-finite as stored, is skipped (``pair``, ``cohort``), never the hour.
DEGENERATE_PREFIX = "degenerate_vectors_"
DEGENERATE = {kind: DEGENERATE_PREFIX + kind for kind in ("user", "item", "pair", "cohort")}
# The run's own fm_budget (a budget run's) and ttl_hours, among its counts: what the health page holds its FM
# calls against, and sets against the last capacity plan.
FM_BUDGET_COUNT = "fm_budget"
TTL_HOURS_COUNT = "ttl_hours"


def staging(settings: Settings, run: HourRun) -> Staging:
    return Staging(settings.staging_root, run.run_key)


def step_staging(settings: Settings, run: HourRun, step: str) -> StepStaging:
    """The staged tables ``step`` declares in :data:`~.pipeline.PRECOMPUTE`, and no others; on a shadow run,
    those of its ``shadow_`` step, under the same names."""
    parts = {fan_out: shard_count(run, fan_out) for fan_out in FAN_OUTS}
    if run.is_shadow:
        return StepStaging(staging(settings, run), PRECOMPUTE.step(SHADOW + step), parts, shadow=True)
    return StepStaging(staging(settings, run), PRECOMPUTE.step(step), parts)


def shard_count(run: HourRun, fan_out: str) -> int:
    """How many tasks a fan-out has this run: the knob of its name (``shards``, ``user_shards``)."""
    return int(getattr(run.params, fan_out))


def code_log(settings: Settings, run: HourRun) -> CodeLog:
    return code_log_of(settings, run.embedding_version, run.code_dim)


def code_log_of(settings: Settings, version: str, code_dim: int) -> CodeLog:
    return CodeLog(settings.data_dir / "precompute" / "codes", version, code_dim)


def event_log(settings: Settings) -> EventLog:
    return EventLog(settings.world_dir())


@contextmanager
def timed(meta: Meta) -> Iterator[Meta]:
    """Adds the wall seconds of the block to ``meta`` (a duration for the report, never an input)."""
    t0 = time.perf_counter()
    yield meta
    meta["seconds"] = round(time.perf_counter() - t0, 4)
