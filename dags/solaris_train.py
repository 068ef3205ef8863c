"""
### solaris_train: FM → AE → VM variants → promotion gate, and the demand model

Trains the foundation model on the world's FM span, the autoencoder on its embeddings, every vertical-model
variant on features as they would have been served, then runs the promotion gate: the served VM variant's
chain (FM, AE, VM) becomes `@champion` only if it beats the current champion's NE on the same evaluation
hours. Each task registers its model in MLflow and passes on only version numbers.

Beside the chain, `train_demand` learns which candidate pairs get requested while fresh (the budget
selector's model) from the request log's hours before the run's logical time, and promotes it when its AUC
is at least the champion's.

Runs daily and on demand (trigger it from the UI after new data lands). Its Assets name the three
champions; `solaris_precompute` reads the VM champion's asset as its inlet and resolves the chain from it.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

import pendulum
from airflow.sdk import Param, dag, task

from solaris.assets import AE_CHAMPION, FM_CHAMPION, VM_CHAMPION
from solaris.precompute.params import airflow_param


def _context(params: dict[str, Any]) -> tuple[Any, Any]:
    from solaris.config import Settings
    from solaris.training import steps

    settings = Settings.from_env()
    return settings, steps.plan(settings, int(params["epochs"]), int(params["seed"]))


@dag(
    dag_id="solaris_train",
    schedule="@daily",
    start_date=pendulum.datetime(2026, 1, 1, tz="UTC"),
    catchup=False,
    max_active_runs=1,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    tags=["solaris", "training", "mlflow"],
    doc_md=__doc__,
    params={
        "epochs": Param(12, type="integer", minimum=1, maximum=100, description="maximum epochs per model"),
        "seed": Param(0, type="integer", minimum=0, description="training seed"),
        "ttl_hours": Param(**airflow_param("ttl_hours")),
    },
)
def solaris_train() -> None:
    @task
    def train_fm(params: dict[str, Any] | None = None) -> dict[str, Any]:
        from solaris.training import steps

        return steps.train_fm(*_context(params or {}))

    @task
    def train_ae(fm: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        from solaris.training import steps

        return steps.train_ae(*_context(params or {}), fm["fm_version"])

    @task
    def train_vms(ae: dict[str, Any], params: dict[str, Any] | None = None) -> dict[str, Any]:
        from solaris.training import steps

        return steps.train_vms(*_context(params or {}), ae["ae_version"])

    @task
    def promote(
        fm: dict[str, Any], ae: dict[str, Any], vms: dict[str, Any], params: dict[str, Any] | None = None
    ) -> dict[str, Any]:
        from solaris.training import steps

        return steps.gate(*_context(params or {}), fm["fm_version"], ae["ae_version"], vms)

    @task(outlets=[FM_CHAMPION, AE_CHAMPION, VM_CHAMPION])
    def announce(decision: dict[str, Any]) -> dict[str, Any]:
        """Emit the champion Assets only when the champions really moved; a refused challenger is a skip."""
        from airflow.sdk.exceptions import AirflowSkipException

        if not decision["promoted"]:
            raise AirflowSkipException(f"challenger not promoted: {decision['reason']}")
        return decision

    @task
    def train_demand(
        params: dict[str, Any] | None = None, data_interval_end: datetime | None = None, dag_run: Any = None
    ) -> dict[str, Any]:
        from solaris.config import Settings
        from solaris.precompute.spec import target_time
        from solaris.training import steps

        params = params or {}
        at = target_time(data_interval_end, dag_run.run_after if dag_run else None)
        return steps.train_demand(Settings.from_env(), at, int(params["ttl_hours"]), int(params["seed"]))

    train_demand()
    fm = train_fm()
    ae = train_ae(fm)
    vms = train_vms(ae)
    announce(promote(fm, ae, vms))


solaris_train()
