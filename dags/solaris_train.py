"""
### solaris_train: FM → AE → one mapped task per VM → promotion gate, and the demand model

Every step trains on the event log's hours before the run's logical time (its data interval's end), so the
steps of one run see the same hours while live traffic keeps adding more. Trains the foundation model on the
world's FM span, the autoencoder on its embeddings, then one mapped
`train_vm` task per configured vertical model (`vms.toml`, default `ctr` and `cvr`): every variant of it on
features as they would have been served. The promotion gate re-scores each VM's champion on the same
evaluation hours; the new FM and AE are one table every VM reads, so their chain becomes `@champion` (through
the shadow precompute when a champion exists) only if every VM beats its own.

Trigger it with `vm` set to one VM's name to train that VM alone on the champion FM and AE: `train_fm` and
`train_ae` skip, and only that VM's alias can move.

Beside the chain, `train_demand` learns which candidate pairs get requested while fresh (the budget
selector's model) from the request log's hours before the run's logical time, and promotes it when its AUC
is at least the champion's.

Runs daily and on demand (trigger it from the UI after new data lands). `announce_chain` emits the FM and
AE champion Assets when they moved, `announce_vms` the VM champion Asset when any VM's did; `solaris_precompute`
reads the latter as its inlet and resolves the chain from the lead VM's champion.
"""

from __future__ import annotations

from datetime import datetime, timedelta
from typing import Any

from airflow.sdk import Param, dag, task

from solaris.assets import AE_CHAMPION, FM_CHAMPION, VM_CHAMPION
from solaris.config import Settings
from solaris.dag_defaults import DAG_DEFAULTS
from solaris.live.timetable import live_or
from solaris.precompute.params import airflow_param
from solaris.training_knobs import EPOCHS, MAX_EPOCHS
from solaris.vms import ALL_VMS


def _context(params: dict[str, Any], data_interval_end: datetime | None, dag_run: Any) -> tuple[Any, Any, datetime]:
    """Settings, the training plan and the run's logical time: every step trains on the log before it."""
    from solaris.precompute.spec import target_time
    from solaris.training import steps

    steps.yield_cpu()
    settings = Settings.from_env()
    until = target_time(data_interval_end, dag_run.run_after if dag_run else None)
    return settings, steps.plan(settings, int(params["epochs"]), int(params["seed"])), until


def _skip_unless_chain(params: dict[str, Any]) -> None:
    from airflow.sdk.exceptions import AirflowSkipException

    if params["vm"] != ALL_VMS:
        raise AirflowSkipException(f"training VM {params['vm']} alone on the champion FM and AE")


@dag(
    dag_id="solaris_train",
    schedule=live_or(24, "@daily"),
    **DAG_DEFAULTS,
    default_args={"retries": 1, "retry_delay": timedelta(minutes=5)},
    tags=["solaris", "training", "mlflow"],
    doc_md=__doc__,
    params={
        "epochs": Param(EPOCHS, type="integer", minimum=1, maximum=MAX_EPOCHS, description="maximum epochs per model"),
        "seed": Param(0, type="integer", minimum=0, description="training seed"),
        "ttl_hours": Param(**airflow_param("ttl_hours")),
        "vm": Param(
            ALL_VMS,
            type="string",
            enum=[ALL_VMS, *(spec.name for spec in Settings.from_env().vms())],
            description="all: a new FM and AE with every configured VM; a VM's name: that VM alone on the champions",
        ),
    },
)
def solaris_train() -> None:
    @task
    def plan_vms(params: dict[str, Any] | None = None) -> list[str]:
        from solaris.training import steps

        return steps.vm_names(Settings.from_env(), (params or {})["vm"])

    @task
    def train_fm(
        params: dict[str, Any] | None = None, data_interval_end: datetime | None = None, dag_run: Any = None
    ) -> dict[str, Any]:
        from solaris.training import steps

        _skip_unless_chain(params or {})
        return steps.fm_task(*_context(params or {}, data_interval_end, dag_run))

    @task
    def train_ae(
        fm: dict[str, Any],
        params: dict[str, Any] | None = None,
        data_interval_end: datetime | None = None,
        dag_run: Any = None,
    ) -> dict[str, Any]:
        from solaris.training import steps

        _skip_unless_chain(params or {})
        return steps.ae_task(*_context(params or {}, data_interval_end, dag_run), fm["fm_version"])

    @task(trigger_rule="none_failed")
    def train_vm(
        vm: str,
        ae: dict[str, Any] | None,
        params: dict[str, Any] | None = None,
        data_interval_end: datetime | None = None,
        dag_run: Any = None,
    ) -> dict[str, Any]:
        """``ae`` is None when train_ae skipped: the VM trains alone on the champion FM and AE."""
        from solaris.training import steps

        context = _context(params or {}, data_interval_end, dag_run)
        return steps.vm_task(*context, vm, ae["ae_version"] if ae else None)

    @task(trigger_rule="none_failed")
    def promote(
        vms: list[dict[str, Any]],
        params: dict[str, Any] | None = None,
        data_interval_end: datetime | None = None,
        dag_run: Any = None,
    ) -> dict[str, Any]:
        from solaris.training import steps

        return steps.gate(*_context(params or {}, data_interval_end, dag_run), list(vms))

    @task(outlets=[FM_CHAMPION, AE_CHAMPION])
    def announce_chain(decision: dict[str, Any]) -> dict[str, Any]:
        """Emit the FM and AE champion Assets only when those champions really moved."""
        from airflow.sdk.exceptions import AirflowSkipException

        if not decision["chain_moved"]:
            raise AirflowSkipException(f"FM and AE champions unchanged: {decision['reason']}")
        return decision

    @task(outlets=[VM_CHAMPION])
    def announce_vms(decision: dict[str, Any]) -> dict[str, Any]:
        """Emit the VM champion Asset only when some VM's champion moved; a refused challenger is a skip."""
        from airflow.sdk.exceptions import AirflowSkipException

        if not decision["promoted"]:
            raise AirflowSkipException(f"no VM promoted: {decision['reason']}")
        return decision

    @task
    def train_demand(
        params: dict[str, Any] | None = None, data_interval_end: datetime | None = None, dag_run: Any = None
    ) -> dict[str, Any]:
        from solaris.precompute.spec import target_time
        from solaris.training import steps

        steps.yield_cpu()
        params = params or {}
        at = target_time(data_interval_end, dag_run.run_after if dag_run else None)
        return steps.train_demand(Settings.from_env(), at, int(params["ttl_hours"]), int(params["seed"]))

    train_demand()
    ae = train_ae(train_fm())
    decision = promote(train_vm.partial(ae=ae).expand(vm=plan_vms()))
    announce_chain(decision)
    announce_vms(decision)


solaris_train()
