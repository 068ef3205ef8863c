"""The hourly precompute as users grow (#18 item 4): seconds per 1,000 selected pairs and peak memory, per
step, each step a task in a fresh process as Airflow runs it.

Worlds are the ``large`` preset (20,000 items, 1.2 requests per user and day) at each user count; the FM, AE
and lead VM are untrained models of the sizes training builds (cost does not depend on the weights, so no
training is needed), registered as one chain in a scratch MLflow store; the selector is the verifier (the
budget selector needs a demand model trained on the world). Two consecutive hours run on a fresh store; the
second is reported, since it has what every hour after it has (re-queued misses, pairs still fresh, the KNN
updated rather than built). Peak memory is the task process's maximum RSS, imports included.
The baseline of the ratios is the smallest world, measured in the same run.
"""

from __future__ import annotations

import argparse
import os
import resource
import sys
import tempfile
import time
from collections.abc import Sequence
from concurrent.futures import ProcessPoolExecutor
from dataclasses import dataclass, replace
from datetime import timedelta
from multiprocessing import get_context
from pathlib import Path
from typing import Any

import mlflow
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.synthetic import PRESETS, generate_world
from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.models.features import HistoryIndex, IdTable, fm_matrix
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.vm import VerticalModel, VMConfig
from solaris.precompute import nodes
from solaris.precompute.pipeline import PRECOMPUTE
from solaris.precompute.run import call_node, run_resolved, wall_clock
from solaris.training.jobs import HISTORY_COLUMNS

PARAMS = {"shards": 2, "device": "cpu", "selector": "verifier"}
GIB = 1024**3


@dataclass(frozen=True)
class Task:
    step: str
    shard: int | None
    seconds: float
    peak_bytes: int
    meta: dict[str, Any]


def scratch_settings(root: Path, world: str) -> Settings:
    return Settings.from_env({"SOLARIS_HOME": str(root), "SOLARIS_WORLD": world, "SOLARIS_DEVICE": "cpu"})


def make_world(settings: Settings, users: int, days: int) -> EventLog:
    config = replace(PRESETS["large"], name=settings.world, n_users=users, days=days)
    return generate_world(config, settings.world_dir(), overwrite=True, progress=False)


def register_untrained_chain(settings: Settings, log: EventLog) -> None:
    """FM, AE and the lead VM at training's default sizes, as the lead's @champion chain; seeded, so that two
    runs of the bench on the same world select alike."""
    import torch

    from solaris.tracking import registry

    torch.manual_seed(0)

    users = IdTable.from_table(log.users(), "user_id", "u_")
    items = IdTable.from_table(log.items(), "item_id", "i_")
    sample = log.impressions(log.end - timedelta(hours=2), log.end).slice(0, 4096)
    index = HistoryIndex.from_table(sample.select(HISTORY_COLUMNS))
    fm = FoundationModel(FMConfig(), users, items).eval()
    matrix = fm_matrix(sample, index, fm.config.history)
    ae_config = AEConfig(input_dim=fm.config.embedding_dim)  # as training sizes it
    ae = Autoencoder(ae_config, embed(fm, matrix, device="cpu").embedding).eval()
    vm = VerticalModel(VMConfig(variant="solaris", code_dim=ae.config.code_dim), users, items).eval()
    lead = settings.vms()[0].name
    client = registry.connect(settings)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-bench-scale"))
    with mlflow.start_run():
        chain = registry.log_chain(client, fm, ae, vm, matrix[:5], lead)
    registry.set_chain_alias(client, chain, registry.CHAMPION)


def _task(settings: Settings, resolved: dict[str, Any], step: str, shard: int | None) -> Task:
    """One step in this (fresh) process: its node's wall time and the process's peak RSS."""
    run = nodes.hour_run(resolved)
    started = time.perf_counter()
    meta = call_node(run, settings, step, shard)
    seconds = time.perf_counter() - started
    return Task(step, shard, seconds, resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024, meta)


def task_processes() -> Any:
    """Fresh processes forked from a server that has imported what a task imports, and nothing else: no
    memory carried between tasks, without paying the imports (about 10 s here) for each of them."""
    context = get_context("forkserver")
    context.set_forkserver_preload(["torch", "mlflow", "faiss", "solaris.precompute.nodes", __name__])
    return context


def run_hour_as_tasks(settings: Settings, hour_end: Any, params: dict[str, Any]) -> list[Task]:
    """The in-process runner's steps, in its order, each in a new process."""
    resolved = nodes.resolve(settings, hour_end, params, wall_clock())
    tasks: list[Task] = []

    def in_fresh_process(step: str, shard: int | None) -> dict[str, Any]:
        with ProcessPoolExecutor(1, mp_context=task_processes(), max_tasks_per_child=1) as pool:
            tasks.append(pool.submit(_task, settings, resolved, step, shard).result())
        return tasks[-1].meta

    run_resolved(settings, resolved, call=in_fresh_process)
    return tasks


def measure(users: int, days: int, workdir: Path, params: dict[str, Any]) -> tuple[int, list[Task], dict[str, float]]:
    settings = scratch_settings(workdir / f"users{users}", f"users{users}")
    started = time.perf_counter()
    log = make_world(settings, users, days)
    generated = time.perf_counter() - started
    register_untrained_chain(settings, log)
    hour = log.end - timedelta(hours=10)  # the last day's afternoon: full history behind it
    first = run_hour_as_tasks(settings, hour, params)
    second = run_hour_as_tasks(settings, hour + timedelta(hours=1), params)
    selected = sum(t.meta.get("selected", 0) for t in second)
    extra = {"generate_s": generated, "first_hour_s": sum(t.seconds for t in first)}
    extra["impressions"] = float(log.meta["counts"]["impressions"])
    return selected, second, extra


def by_step(tasks: list[Task]) -> dict[str, tuple[float, int]]:
    """Seconds summed over a step's shards, and its largest task's peak RSS."""
    found: dict[str, tuple[float, int]] = {}
    for t in tasks:
        seconds, peak = found.get(t.step, (0.0, 0))
        found[t.step] = (seconds + t.seconds, max(peak, t.peak_bytes))
    return found


def report(results: dict[int, tuple[int, list[Task], dict[str, float]]]) -> None:
    sizes = sorted(results)
    base = sizes[0]
    tables = {n: by_step(results[n][1]) for n in sizes}
    for n in sizes:
        selected, tasks, extra = results[n]
        print(
            f"users {n:,}: {extra['impressions']:,.0f} impressions (generated in {extra['generate_s']:.0f} s); "
            f"hour 2: {selected:,} pairs selected, {sum(t.seconds for t in tasks):.1f} s in tasks "
            f"(hour 1: {extra['first_hour_s']:.1f} s)"
        )
    print(f"\n{'step':24}" + "".join(f"{f'{n:,} users':>30}" for n in sizes) + f"{'s/1k vs ' + f'{base:,}':>18}")
    print(f"{'':24}" + "".join(f"{'s/1k pairs   peak MiB':>30}" for _ in sizes))
    idle = [s for s in PRECOMPUTE.names if all(tables[n].get(s, (0.0, 0))[0] < 5e-3 for n in sizes)]
    for step in (s for s in PRECOMPUTE.names if s not in idle):
        costs = []
        row = f"{step:24}"
        for n in sizes:
            seconds, peak = tables[n].get(step, (0.0, 0))
            per_k = seconds / max(results[n][0], 1) * 1000
            costs.append(per_k)
            row += f"{per_k:>18.3f}{peak / 2**20:>12.0f}"
        ratio = costs[-1] / costs[0] if costs[0] > 0 else float("nan")
        print(row + f"{ratio:>18.2f}")
    totals = [sum(s for s, _ in tables[n].values()) / max(results[n][0], 1) * 1000 for n in sizes]
    peaks = [max(p for _, p in tables[n].values()) for n in sizes]
    cells = "".join(f"{t:>18.3f}{p / 2**20:>12.0f}" for t, p in zip(totals, peaks))
    print(f"{'all steps':24}{cells}{totals[-1] / totals[0]:>18.2f}")
    print(f"(under 5 ms at every size, left out: {', '.join(idle)}; the shadow steps are no-ops without a challenger)")
    print("(a step mapped over shards: its seconds summed over them, its peak the largest task's)")
    worst = max(peaks)
    print(f"\npeak task memory {worst / GIB:.2f} GiB ({'within' if worst <= 4 * GIB else 'OVER'} the 4 GiB budget)")


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--users", type=int, nargs="+", default=[10_000, 30_000, 100_000])
    parser.add_argument("--days", type=int, default=PRESETS["large"].days, help="days of events per world")
    parser.add_argument("--quick", action="store_true", help="2,000 and 6,000 users over 8 days")
    parser.add_argument("--workdir", type=Path, default=None, help="keep the worlds here (default: a temp dir)")
    parser.add_argument("--user-shards", type=int, default=1, help="tasks each per-user step runs as")
    args = parser.parse_args(argv)
    params = PARAMS | {"user_shards": args.user_shards}
    users, days = ([2_000, 6_000], 8) if args.quick else (sorted(args.users), args.days)
    os.environ.setdefault("MLFLOW_ENABLE_ARTIFACTS_PROGRESS_BAR", "false")
    with tempfile.TemporaryDirectory() as tmp:
        workdir = args.workdir or Path(tmp)
        results = {}
        for n in users:
            print(f"measuring {n:,} users over {days} days, {args.user_shards} user shard(s) ...", flush=True)
            results[n] = measure(n, days, workdir, params)
        report(results)
    return 0


if __name__ == "__main__":
    sys.exit(main())
