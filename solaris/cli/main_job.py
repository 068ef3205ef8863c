"""``solaris main``: the README's main job on the embedded setup.

Generate the world, train and register the models (FM, AE, VM variants, promotion gate; the demand model
on the hours before the first precomputed one), then run the
``solaris_precompute`` DAG through Airflow (``dag.test``, SQLite metadata DB) for the world's last hours,
and print each hour's coverage by tier and seconds per step.
"""

from __future__ import annotations

import argparse
import json
import os
import time
from datetime import datetime, timedelta
from typing import Any

from solaris.precompute.params import PrecomputeParams, cli_option


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("main", help="generate, train, and run the hourly precompute through Airflow")
    p.add_argument("--preset", default="default", help="world preset (tiny|default|churn|plain|large)")
    p.add_argument("--seed", type=int, default=0)
    p.add_argument("--hours", type=int, default=6, help="consecutive precompute hours, ending at the world's end")
    flag, options = cli_option("shards")
    p.add_argument(flag, **options)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.synthetic import generate_world, preset

    if args.hours < 1:
        raise ValueError(f"--hours must be at least 1, got {args.hours}")
    settings = get_settings()
    conf = {"shards": args.shards, "device": settings.device}
    PrecomputeParams.from_mapping(conf)  # refused now, not after minutes of generating and training
    started = time.perf_counter()
    log = generate_world(preset(args.preset).with_seed(args.seed), settings.world_dir(), overwrite=True, progress=True)
    print(json.dumps(log.summary(), indent=2))
    _train(settings)
    hours = [log.end - timedelta(hours=args.hours - i) for i in range(args.hours)]
    _train_demand(settings, hours[0])
    keys = _precompute_through_airflow(settings, hours, conf)

    from solaris.precompute.summary import run_metrics, table

    print("\nhourly precompute (coverage: the hour before each run, as served)\n")
    print(table(run_metrics(settings, keys)))
    print(f"\nmain job: {time.perf_counter() - started:.0f} s")
    return 0


def _train_demand(settings: Any, until: datetime) -> None:
    """The budget selector's demand model, on the request log's hours before the first precomputed hour."""
    from solaris.training import steps

    print(json.dumps(steps.train_demand(settings, until, PrecomputeParams.ttl_hours, seed=0)))


def _train(settings: Any) -> None:
    from solaris.models.training import FitConfig
    from solaris.training.jobs import TrainPlan, train_all

    report = train_all(settings, settings.world_dir(), TrainPlan(fit=FitConfig(threads=1), device=settings.device))
    versions = {"fm": report.fm.version, "ae": report.ae.version}
    served = {f"vm_{name}": variants["solaris"].version for name, variants in report.vms.items()}
    ne = {f"vm_{name}_ne": variants["solaris"].metrics["ne"] for name, variants in report.vms.items()}
    print(json.dumps(versions | served | ne))
    if report.decision is not None:
        print(json.dumps({"promoted": report.decision.promoted, "reason": report.decision.reason}))


def _precompute_through_airflow(settings: Any, hours: list[datetime], conf: dict[str, Any]) -> list[str]:
    """One ``dag.test`` per hour, in order; a failed hour stops the job, naming it."""
    from solaris.airflow_env import DAGS_FOLDER, bootstrap
    from solaris.precompute.spec import run_key

    os.environ.setdefault("AIRFLOW__LOGGING__LOGGING_LEVEL", "WARNING")  # task logs would drown the report
    bootstrap(settings)
    from airflow.models import DagBag

    bag = DagBag(dag_folder=str(DAGS_FOLDER))
    if bag.import_errors:
        raise RuntimeError(f"DAG import errors: {bag.import_errors}")
    dag = bag.dags["solaris_precompute"]
    keys = []
    for hour in hours:
        t0 = time.perf_counter()
        dag_run = dag.test(logical_date=hour, run_conf=conf)
        if dag_run.state != "success":
            raise RuntimeError(f"solaris_precompute for {hour.isoformat()} ended {dag_run.state}")
        keys.append(run_key(hour))
        print(f"solaris_precompute {hour.isoformat()}: {dag_run.state} in {time.perf_counter() - t0:.1f} s", flush=True)
    return keys
