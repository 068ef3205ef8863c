"""
### solaris_precompute: the hourly speculative precompute

For the hour starting at the end of the run's data interval, using only data before it: **resolve** pins the
lead VM's `solaris-vm-<name>@champion` (the first in `vms.toml`), the FM and AE it was trained with and the
demand model, once for the whole run; **coverage** measures the last hour by tier; **candidates** guesses
the pairs likely to be requested, with the last hour's misses and without pairs still fresh all hour;
**exposures** writes every recent user's exposure counters as of the hour; **score**, **cut** and **select**
choose what the FM embeds: by default the budget selector (P(requested while fresh) x the pair code's gain, the
best `fm_budget` pairs), or the verifier (the lead VM's top `top_fraction`), each user shard (`user_shards`
tasks) scoring and taking its own users' pairs up to the cut found over all of them; **embed_shard** embeds and
compresses one shard, mapped over `shards` tasks in the `gpu` pool and queue; then the five tiers are written
with TTL `ttl_hours` (pair codes, user aggregates, similar users, similar items, new-user cohorts), the
same for a chain awaiting promotion (`shadow_*`, no-ops without one), **expire** sweeps expired rows,
**shadow_gate** decides on a chain in shadow, and **finish** closes the run record and logs to MLflow.

A run triggered without a logical date (the REST API's default) precomputes the hour of its `run_after`.
An hour with no requests before it has nothing to precompute: **candidates** is skipped, with the reason,
and so is every step after it; the run record says `skipped`. When a task fails, **mark_failed** marks the
run record failed and fails too, naming the failed task(s), so that the DAG run ends `failed`.

The steps, their order, the tables each passes on (Parquet in a run-scoped staging folder; XCom carries
only small metadata) and the sharded GPU step are declared once in `solaris.precompute.pipeline`; this file
builds the tasks from that declaration and wires them, and the list below is generated from it. Re-running
an hour rewrites the same rows.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, task
from airflow.sdk.exceptions import AirflowFailException, AirflowSkipException

from solaris.assets import VM_CHAMPION
from solaris.dag_defaults import DAG_DEFAULTS
from solaris.live.timetable import live_or
from solaris.precompute.params import FORM, airflow_param
from solaris.precompute.pipeline import FAN_OUTS, PRECOMPUTE, Step


def _settings() -> Any:
    from solaris.config import Settings

    return Settings.from_env()


def _run(resolved: dict[str, Any]) -> Any:
    from solaris.precompute.nodes import hour_run

    return hour_run(resolved)


def _step_task(step: Step) -> Callable[..., Any]:
    """The task that calls the step's code (``Step.node``); an FM-shard step runs in the GPU pool and queue.

    A step that finds nothing to precompute closes the run record as skipped and skips itself, which skips
    every task after it.
    """

    def run_step(resolved: dict[str, Any], shard: int | None = None) -> dict[str, Any]:
        from solaris.precompute import nodes
        from solaris.precompute.run import call_node

        run, settings = _run(resolved), _settings()
        try:
            return call_node(run, settings, step.name, shard)
        except nodes.NothingToPrecompute as nothing:
            nodes.skip(run, settings, datetime.now(UTC))
            raise AirflowSkipException(str(nothing)) from nothing

    placement = {"pool": step.pool, "queue": step.pool} if step.pool else {}
    return task(task_id=step.name, **placement)(run_step)


@dag(
    dag_id="solaris_precompute",
    schedule=live_or(1, "@hourly"),
    **DAG_DEFAULTS,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["solaris", "precompute", "feature-store"],
    doc_md=__doc__ + "\nSteps, in order: " + " → ".join(f"**{step.name}**" for step in PRECOMPUTE.steps) + ".\n",
    params={name: Param(**airflow_param(name)) for name in FORM},
)
def solaris_precompute() -> None:
    @task(inlets=[VM_CHAMPION])
    def resolve(
        params: dict[str, Any] | None = None, data_interval_end: datetime | None = None, dag_run: Any = None
    ) -> dict[str, Any]:
        from solaris.precompute import nodes
        from solaris.precompute.spec import NoTargetHour, target_time

        try:
            at = target_time(data_interval_end, dag_run.run_after if dag_run else None)
        except NoTargetHour as exc:
            raise AirflowFailException(str(exc)) from exc
        return nodes.resolve(_settings(), at, params, datetime.now(UTC))

    def shard_ids(fan_out: str) -> Callable[..., Any]:
        def ids(resolved: dict[str, Any]) -> list[int]:
            from solaris.precompute.run_files import shard_count

            return list(range(shard_count(_run(resolved), fan_out)))

        return task(task_id=f"{fan_out}_ids")(ids)

    @task
    def finish(resolved: dict[str, Any], outputs: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        # A per-shard output is a lazy sequence: indexing it up to its length, since iterating probes one
        # offset past the end, which Airflow logs as an error ("XCom not found").
        outputs = {
            name: [out[i] for i in range(len(out))] if PRECOMPUTE.step(name).per_shard else out
            for name, out in outputs.items()
        }
        return nodes.finish(_run(resolved), _settings(), resolved, outputs, datetime.now(UTC))

    @task(trigger_rule="one_failed", retries=0)
    def mark_failed(resolved: dict[str, Any] | None, ti: Any = None) -> None:
        """Marks the run record failed, then fails: Airflow derives the run's state from this, its only leaf."""
        from solaris.precompute import nodes

        if resolved is not None:  # else resolve itself failed: no run record was opened
            nodes.fail(_run(resolved), _settings(), datetime.now(UTC))
        states = ti.get_task_states(dag_id=ti.dag_id, run_ids=[ti.run_id]).get(ti.run_id, {})
        failed = sorted(name for name, state in states.items() if state == "failed")
        raise AirflowFailException(f"the run failed at {', '.join(failed) or 'an upstream task'}")

    resolved = resolve()
    shards = {fan_out: shard_ids(fan_out)(resolved) for fan_out in FAN_OUTS}
    outputs: dict[str, Any] = {}
    for step in PRECOMPUTE.steps:
        step_task = _step_task(step)
        if step.mapped_over is not None:
            outputs[step.name] = step_task.partial(resolved=resolved).expand(shard=shards[step.mapped_over])
        else:
            outputs[step.name] = step_task(resolved)
        for upstream in step.after:
            outputs[upstream] >> outputs[step.name]
    done = finish(resolved, outputs)
    [*outputs.values(), done] >> mark_failed(resolved)


solaris_precompute()
