"""
### solaris_replay: the paper's table on an event log

Replays an event log hour by hour with the functions `solaris_precompute` and the ranker run: FM, AE and
first-stage VMs are trained on the first span; on the logging span every hour is precomputed, its
impressions served and the features as served logged, the FM refreshed daily (`fm_refresh`); every VM
variant is refreshed on what the last FM version served; the
evaluation span is replayed the same way and every model scored on the same served events; finally the
precompute budget (`top_fraction`) is swept, the selectors compared at equal FM calls and the budget selector
run over the capacity plan's grid of spends x TTLs. One mapped task per seed; each writes its report (HTML,
PNGs, JSON) under `SOLARIS_DATA_DIR/replay/<world>/seed-<N>/report` and to the MLflow experiment
`solaris-replay`. The summary task prints every seed's table and the spread across seeds; the plan task the
budget and TTL to run at over every seed (`replay/<world>/plan`, MLflow experiment `solaris-plan`).

Trigger it from the UI with a preset (a synthetic world generated per seed) or a world already imported
(e.g. MovieLens-100K after `solaris data import movielens`). A replay keeps its own store and registry:
it never touches the production champions or feature store.
"""

from __future__ import annotations

from datetime import timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from solaris.dag_defaults import DAG_DEFAULTS
from solaris.eval.protocol import DEFAULT_FM_REFRESH, FM_REFRESH_HOURS, PLAN_MIN_DEMAND, PLAN_TTL_HOURS, REPLAY_KNOBS
from solaris.precompute.params import airflow_param


def _request(params: dict[str, Any]) -> Any:
    from solaris.eval.job import ReplayRequest

    return ReplayRequest(
        preset=params["preset"] or None,
        world=params["world"] or None,
        seeds=tuple(int(s) for s in params["seeds"]),
        knobs={name: params[name] for name in REPLAY_KNOBS},
        sweep=bool(params["sweep"]),
        speculation=bool(params["speculation"]),
        fm_refresh=str(params["fm_refresh"]),
        plan=bool(params["plan"]),
        plan_ttl_hours=tuple(int(t) for t in params["plan_ttl_hours"]),
        plan_min_demand=tuple(float(f) for f in params["plan_min_demand"]),
    )


def _bounds(knob: str) -> dict[str, Any]:
    """A precompute knob's type and bounds, for a list of its values."""
    return {k: v for k, v in airflow_param(knob).items() if k not in ("default", "description")}


@dag(
    dag_id="solaris_replay",
    schedule=None,
    **DAG_DEFAULTS,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=1)},  # a retried seed starts afresh
    tags=["solaris", "evaluation"],
    doc_md=__doc__,
    params={
        "preset": Param(
            "tiny", type=["null", "string"], description="synthetic world per seed (tiny|default|churn|plain|large)"
        ),
        "world": Param(None, type=["null", "string"], description="or: a world under SOLARIS_DATA_DIR/worlds"),
        "seeds": Param([0], type="array", items={"type": "integer", "minimum": 0}, minItems=1),
        **{name: Param(**airflow_param(name)) for name in REPLAY_KNOBS},
        "fm_refresh": Param(
            DEFAULT_FM_REFRESH,
            type="string",
            enum=list(FM_REFRESH_HOURS),
            description="FM refresh while the log replays: daily (production's cadence) or none (ablation: frozen FM)",
        ),
        "sweep": Param(True, type="boolean", description="also sweep top_fraction 0.05 / 0.1 / 0.2 / 0.4"),
        "speculation": Param(
            True, type="boolean", description="also compare the verifier and budget selectors at equal FM calls"
        ),
        "plan": Param(
            True, type="boolean", description="also run the capacity plan's grid (budget x TTL) and write the plan"
        ),
        "plan_ttl_hours": Param(
            list(PLAN_TTL_HOURS),
            type="array",
            items=_bounds("ttl_hours"),
            description="the TTLs the plan's grid runs the budget selector at besides ttl_hours",
        ),
        "plan_min_demand": Param(
            list(PLAN_MIN_DEMAND),
            type="array",
            items=_bounds("min_demand"),
            description="the min_demand floors the plan's grid runs at its largest spend",
        ),
    },
)
def solaris_replay() -> None:
    @task
    def seeds(params: dict[str, Any] | None = None) -> list[int]:
        return list(_request(params or {}).seeds)

    @task(execution_timeout=timedelta(hours=6))
    def replay_seed(seed: int, params: dict[str, Any] | None = None) -> str:
        from solaris.config import Settings
        from solaris.eval.job import replay_one

        return str(replay_one(Settings.from_env(), _request(params or {}), seed))

    @task
    def summarize(report_folders: list[str]) -> str:
        from pathlib import Path

        from airflow.sdk.exceptions import AirflowFailException

        from solaris.eval.job import summary, violated

        folders = [Path(f) for f in report_folders]
        text = summary(folders)
        print(text)
        if broken := violated(folders):  # the run fails, with the reports written for a look
            raise AirflowFailException(f"replay invariants violated in {', '.join(broken)}")
        return text

    @task
    def plan(report_folders: list[str], params: dict[str, Any] | None = None) -> str:
        from pathlib import Path

        from airflow.sdk.exceptions import AirflowSkipException

        from solaris.config import Settings
        from solaris.eval.plan_job import plan_folders
        from solaris.eval.report.plan_view import plan_text

        if not _request(params or {}).plans:
            raise AirflowSkipException("no plan: the replay ran no arms (sweep and speculation off) or plan is off")
        found, out = plan_folders(Settings.from_env(), [Path(f) for f in report_folders])
        print(plan_text(found))
        return str(out)

    folders = replay_seed.expand(seed=seeds())
    summarize(folders)
    plan(folders)


solaris_replay()
