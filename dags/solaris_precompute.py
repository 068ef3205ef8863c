"""
### solaris_precompute: the hourly speculative precompute

For the hour starting at the end of the run's data interval, using only data before it:

1. **resolve** pins `solaris-vm@champion` and the FM and AE it was trained with, once, for the whole run;
2. **coverage** measures the last hour's coverage by tier and the previous run's hit rate (before writing);
3. **candidates** guesses the pairs of users likely to return, adds the last hour's misses (re-queue) and
   drops pairs an earlier run keeps fresh all hour;
4. **select** scores them with the VM (the verifier) and keeps the top fraction;
5. **embed_shard** embeds one shard of the selection with the FM and compresses it with the AE, fanned out
   over `shards` mapped tasks in the `gpu` pool and queue;
6. **write_pairs**, **aggregates**, **neighbours** fill the feature store's three tiers (TTL `ttl_hours`);
7. **expire** sweeps expired rows; **finish** closes the run record and logs metrics to MLflow.

Tables pass between tasks as Parquet in a run-scoped staging folder; XCom carries only small metadata.
Re-running an hour rewrites the same rows. The code is in `solaris.precompute`; this file only wires it.
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta
from typing import Any

import pendulum
from airflow.sdk import Asset, Param, chain, dag, task

# Emitted by solaris_train when it promotes a chain; the run resolves the VM champion it names.
VM_CHAMPION = Asset(name="solaris_vm_champion", uri="x-solaris://mlflow/solaris-vm/champion")


def _settings() -> Any:
    from solaris.config import Settings

    return Settings.from_env()


def _run(resolved: dict[str, Any]) -> Any:
    from solaris.precompute.nodes import hour_run

    return hour_run(resolved)


@dag(
    dag_id="solaris_precompute",
    schedule="@hourly",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 2, "retry_delay": timedelta(minutes=1)},
    tags=["solaris", "precompute", "feature-store"],
    doc_md=__doc__,
    params={
        "top_fraction": Param(
            0.2, type="number", minimum=0.01, maximum=1.0, description="share of candidates the FM embeds"
        ),
        "ttl_hours": Param(4, type="integer", minimum=1, maximum=48, description="hours a pair embedding stays fresh"),
        "shards": Param(2, type="integer", minimum=1, maximum=64, description="FM embedding tasks (mapped)"),
        "batch_size": Param(4096, type="integer", minimum=64, maximum=65536, description="pairs per FM forward"),
        "device": Param("auto", type="string", enum=["auto", "cpu", "cuda"], description="FM device"),
    },
)
def solaris_precompute() -> None:
    @task(inlets=[VM_CHAMPION])
    def resolve(params: dict[str, Any] | None = None, data_interval_end: datetime | None = None) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.resolve(_settings(), data_interval_end, params, datetime.now(UTC))

    @task
    def coverage(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.coverage(_run(resolved), _settings())

    @task
    def candidates(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.candidates(_run(resolved), _settings())

    @task
    def shard_ids(resolved: dict[str, Any]) -> list[int]:
        return list(range(_run(resolved).params.shards))

    @task
    def select(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.select(_run(resolved), _settings())

    @task(pool="gpu", queue="gpu")
    def embed_shard(resolved: dict[str, Any], shard: int) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.embed_shard(_run(resolved), _settings(), shard)

    @task
    def write_pairs(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.write_pairs(_run(resolved), _settings())

    @task
    def aggregates(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.aggregates(_run(resolved), _settings())

    @task
    def neighbours(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.neighbours(_run(resolved), _settings())

    @task
    def expire(resolved: dict[str, Any]) -> dict[str, Any]:
        from solaris.precompute import nodes

        return nodes.expire(_run(resolved), _settings())

    @task
    def finish(
        resolved: dict[str, Any], steps: dict[str, dict[str, Any]], shards: list[dict[str, Any]]
    ) -> dict[str, Any]:
        from solaris.precompute import nodes

        # Indexing the lazy sequence up to its length: iterating it probes one offset past the end, which
        # Airflow logs as an error ("XCom not found").
        metas = [shards[i] for i in range(len(shards))]
        return nodes.finish(_run(resolved), _settings(), resolved, steps, metas, datetime.now(UTC))

    @task(trigger_rule="one_failed", retries=0)
    def mark_failed(resolved: dict[str, Any] | None) -> None:
        from solaris.precompute import nodes

        if resolved is None:  # resolve itself failed: no run record was opened
            return
        nodes.fail(_run(resolved), _settings(), datetime.now(UTC))

    resolved = resolve()
    covered = coverage(resolved)
    pool = candidates(resolved)
    chosen = select(resolved)
    shards = embed_shard.partial(resolved=resolved).expand(shard=shard_ids(resolved))
    written = write_pairs(resolved)
    aggregated = aggregates(resolved)
    linked = neighbours(resolved)
    expired = expire(resolved)
    chain(pool, chosen, shards, written, aggregated, linked, expired)
    covered >> written  # coverage must read the store before this run writes to it
    steps = {
        "coverage": covered, "candidates": pool, "select": chosen, "write": written,
        "aggregates": aggregated, "neighbours": linked, "expire": expired,
    }  # fmt: skip
    done = finish(resolved, steps, shards)
    [covered, pool, chosen, shards, written, aggregated, linked, expired, done] >> mark_failed(resolved)


solaris_precompute()
