"""The capacity plan as a job (``solaris plan``, the end of ``solaris replay`` and the ``solaris_replay`` DAG):
one world's seed reports read from a replay's folder, the plan written beside them and logged to MLflow."""

from __future__ import annotations

from pathlib import Path

import mlflow
from solaris.config import Settings
from solaris.eval.figures import ReplayReport
from solaris.eval.job import metric_name
from solaris.eval.plan import PLAN_FOLDER, PLAN_TARGET, Plan, PlanError, make_plan
from solaris.eval.report.plan_view import write_plan
from solaris.tracking import registry

EXPERIMENT = "solaris-plan"  # apart from the replays' runs: a plan pools several seeds' replays


def report_folders(root: Path) -> list[Path]:
    """Every seed's report folder of the replay at ``root``; refuses a missing or partial replay by name."""
    if not root.is_dir():
        raise PlanError(f"no replay at {root}: give the folder solaris replay wrote (its --out)")
    seeds = sorted(p for p in root.glob("seed-*") if p.is_dir())
    if not seeds:
        raise PlanError(f"{root} holds no replay: no seed-<N> folders")
    if unfinished := [p.name for p in seeds if not (p / "report" / "report.json").is_file()]:
        raise PlanError(f"the replay at {root} is partial: {', '.join(unfinished)} has no report/report.json")
    return [p / "report" for p in seeds]


def plan_folders(settings: Settings, folders: list[Path], target: float = PLAN_TARGET) -> tuple[Plan, Path]:
    """The plan of these seed reports, written to ``plan/`` beside their seed folders and logged to MLflow."""
    reports = [ReplayReport.from_json((f / "report.json").read_text()) for f in folders]
    plan = make_plan(reports, target)
    out = write_plan(plan, folders[0].parent.parent / PLAN_FOLDER)
    _log(settings, plan, out)
    return plan, out


def _log(settings: Settings, plan: Plan, out: Path) -> None:
    client = registry.connect(settings)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, EXPERIMENT))
    with mlflow.start_run(run_name=f"plan-{plan.world}"):
        mlflow.log_params(
            {"world": plan.world, "seeds": ",".join(map(str, plan.seeds)), "commits": ",".join(plan.commits)}
            | {"target": plan.target, "selector": plan.selector.planned}
        )
        if (knee := plan.knee) is not None:
            mlflow.log_params({f"recommended_{k}": v for k, v in vars(knee).items() if not isinstance(v, list)})
        metrics = {}
        for arm in plan.arms:
            key = metric_name(f"{arm.selector} {arm.spend} ttl{arm.ttl_hours} min_demand {arm.min_demand:g}")
            metrics |= {f"plan_{key}_fm_calls_per_hour": arm.fm_calls_per_hour, f"plan_{key}_ne_loss": arm.ne_loss}
        mlflow.log_metrics(metrics)
        mlflow.log_artifacts(str(out), artifact_path="plan")
