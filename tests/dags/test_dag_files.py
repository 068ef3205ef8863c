"""The DAG folder as Airflow parses it: no import errors, documented, retried, and light at the top level."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from dataclasses import replace
from typing import Any

from solaris.airflow_env import DAGS_FOLDER, GPU_POOL
from solaris.eval.protocol import FM_REFRESH_HOURS, PLAN_MIN_DEMAND, PLAN_TTL_HOURS, REPLAY_KNOBS
from solaris.precompute.params import FORM, airflow_param
from solaris.precompute.pipeline import CLOSE, FAN_OUTS, OPEN, PRECOMPUTE, SHARDS, Pipeline

HEAVY = ("torch", "mlflow", "faiss", "pandas", "sqlalchemy", "numpy", "pyarrow")
# The declarations a DAG file may import at parse time: stdlib-only modules (and their packages), and the live
# schedule (stdlib, pendulum and Airflow's timetable base, which airflow.sdk loads anyway).
LIGHT_SOLARIS = {
    "solaris",
    "solaris.config",
    "solaris.airflow_env",
    "solaris.dag_defaults",
    "solaris.assets",
    "solaris.precompute",
    "solaris.precompute.params",
    "solaris.precompute.pipeline",
    "solaris.eval",
    "solaris.eval.protocol",
    "solaris.vms",
    "solaris.live",
    "solaris.live.clock",
    "solaris.live.timetable",
    "solaris.training_knobs",
}


def test_dag_folder_parses_without_errors(dagbag: Any) -> None:
    assert dagbag.import_errors == {}
    assert set(dagbag.dags) == {"solaris_precompute", "solaris_replay", "solaris_train"}


def test_every_dag_has_tags_retries_and_docs(dagbag: Any) -> None:
    for dag in dagbag.dags.values():
        assert "solaris" in dag.tags, dag.dag_id
        assert dag.default_args["retries"] >= 1, dag.dag_id
        assert dag.doc_md and dag.dag_id in dag.doc_md, dag.dag_id
        assert not dag.catchup and dag.max_active_runs == 1, dag.dag_id


def test_precompute_dag_schedule_params_and_sharded_gpu_embedding(dagbag: Any) -> None:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    dag = dagbag.dags["solaris_precompute"]
    assert dag.schedule == "@hourly"
    form = {
        "selector",
        "fm_budget",
        "min_demand",
        "demand_auc_floor",
        "top_fraction",
        "ttl_hours",
        "ttl_jitter_hours",
        "shards",
        "user_shards",
        "batch_size",
        "device",
    }
    assert set(dag.params) == set(FORM) == form
    for name in FORM:
        param = dag.params.get_param(name)
        declared = airflow_param(name)
        default, description = declared.pop("default"), declared.pop("description")
        assert (param.value, param.description, param.schema) == (default, description, declared), name
    assert dag.params.get_param("top_fraction").schema["exclusiveMinimum"] == 0
    assert dag.params.get_param("device").schema["enum"] == ["auto", "cpu", "cuda"]
    assert dag.params.get_param("selector").schema["enum"] == ["budget", "verifier"]
    assert dag.params.get_param("fm_budget").schema == {"type": "integer", "minimum": 1}
    assert "FM calls" in dag.params.get_param("fm_budget").description
    assert dag.params.get_param("demand_auc_floor").schema == {"type": "number", "minimum": 0, "maximum": 1}
    assert dag.params.get_param("min_demand").schema == {"type": "number", "minimum": 0, "maximum": 1}
    shard = dag.task_dict["embed_shard"]
    assert (shard.pool, shard.queue) == (GPU_POOL, "gpu")
    assert isinstance(shard, MappedOperator)
    assert {a.name for a in dag.task_dict["resolve"].inlets} == {"solaris_vm_champion"}
    emitted = {a.name for a in dagbag.dags["solaris_train"].task_dict["announce_vms"].outlets}
    assert emitted == {"solaris_vm_champion"}


def test_train_dag_maps_one_vm_task_per_configured_model_and_can_train_one_alone(dagbag: Any) -> None:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    dag = dagbag.dags["solaris_train"]
    assert dag.params.get_param("vm").value == "all"
    assert dag.params.get_param("vm").schema["enum"] == ["all", "ctr", "cvr"]  # the default configuration
    train_vm = dag.task_dict["train_vm"]
    assert isinstance(train_vm, MappedOperator) and train_vm.upstream_task_ids == {"plan_vms", "train_ae"}
    assert train_vm.trigger_rule == "none_failed"  # runs when the FM and AE skip (one VM alone)
    assert dag.task_dict["promote"].upstream_task_ids == {"train_vm"}
    chain = {a.name for a in dag.task_dict["announce_chain"].outlets}
    assert chain == {"solaris_fm_champion", "solaris_ae_champion"}


def test_replay_dag_is_triggered_by_hand_with_one_mapped_task_per_seed(dagbag: Any) -> None:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    dag = dagbag.dags["solaris_replay"]
    assert dag.schedule is None
    plan_grid = {"plan_ttl_hours": ("ttl_hours", PLAN_TTL_HOURS), "plan_min_demand": ("min_demand", PLAN_MIN_DEMAND)}
    form = {"preset", "world", "seeds", "fm_refresh", "sweep", "speculation", "plan", *plan_grid, *REPLAY_KNOBS}
    assert set(dag.params) == form
    for name, (knob, default) in plan_grid.items():  # the replay's own defaults, each value in the knob's bounds
        param, bounds = dag.params.get_param(name), airflow_param(knob)
        assert param.value == list(default)
        assert param.schema["items"] == {k: bounds[k] for k in ("type", "minimum", "maximum")}
    assert dag.params.get_param("fm_refresh").schema["enum"] == list(FM_REFRESH_HOURS)  # the CLI's choices
    for name in REPLAY_KNOBS:  # the precompute's own definition of each (solaris.precompute.params)
        param, expected = dag.params.get_param(name), airflow_param(name)
        assert (param.value, param.description) == (expected.pop("default"), expected.pop("description"))
        assert param.schema == expected
    assert dag.params.get_param("seeds").schema["items"] == {"type": "integer", "minimum": 0}
    # The form's values reach the replay's request, the grid's included.
    spec = importlib.util.spec_from_file_location("replay_dag_file", DAGS_FOLDER / "solaris_replay.py")
    module = importlib.util.module_from_spec(spec)  # type: ignore[arg-type]
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    request = module._request(dag.params.dump() | {"plan_ttl_hours": [8], "plan_min_demand": [0.2]})
    assert (request.preset, request.plan_ttl_hours, request.plan_min_demand) == ("tiny", (8,), (0.2,))
    assert isinstance(dag.task_dict["replay_seed"], MappedOperator)
    assert dag.task_dict["summarize"].upstream_task_ids == {"replay_seed"}
    assert dag.task_dict["plan"].upstream_task_ids == {"replay_seed"}


def test_dag_modules_import_nothing_heavy_at_top_level(airflow_env: dict[str, str]) -> None:
    """Heavy packages the DAG files add beyond what ``airflow.sdk`` itself loads (it brings sqlalchemy)."""
    probe = f"""
import importlib.util, json, pathlib, sys
import airflow.sdk, pendulum
before = set(sys.modules)
for path in sorted(pathlib.Path({str(DAGS_FOLDER)!r}).glob("*.py")):
    spec = importlib.util.spec_from_file_location(path.stem, path)
    sys.modules[path.stem] = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(sys.modules[path.stem])
print(json.dumps(sorted(set(sys.modules) - before)))
"""
    done = subprocess.run(
        [sys.executable, "-c", probe], env=os.environ | airflow_env, capture_output=True, text=True, check=True
    )
    added = json.loads(done.stdout.strip().splitlines()[-1])
    assert "solaris_precompute" in added and "solaris_train" in added
    assert [m for m in added if m.split(".")[0] in HEAVY] == []
    assert {m for m in added if m.split(".")[0] == "solaris"} <= LIGHT_SOLARIS


def dag_edges(dag: Any) -> set[tuple[str, str]]:
    return {(up, task.task_id) for task in dag.tasks for up in task.upstream_task_ids}


def declared_edges(pipeline: Pipeline = PRECOMPUTE) -> set[tuple[str, str]]:
    """The task graph the declaration implies: resolve feeds every task, each fan-out's shard ids feed the steps
    mapped over it, ``after`` orders the steps, finish takes every output, mark_failed watches them all."""
    ids = [f"{fan_out}_ids" for fan_out in FAN_OUTS]
    edges = {(OPEN, name) for name in (*pipeline.names, CLOSE, "mark_failed", *ids)}
    for step in pipeline.steps:
        edges |= {(up, step.name) for up in step.after} | {(step.name, CLOSE), (step.name, "mark_failed")}
        if step.mapped_over is not None:
            edges.add((f"{step.mapped_over}_ids", step.name))
    return edges | {(CLOSE, "mark_failed")}


def test_precompute_dag_task_graph_is_the_pipeline_declaration(dagbag: Any) -> None:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    dag = dagbag.dags["solaris_precompute"]
    assert dag_edges(dag) == declared_edges()
    for step in PRECOMPUTE.steps:
        assert (dag.task_dict[step.name].pool == GPU_POOL) == (step.mapped_over == SHARDS), step.name
        assert isinstance(dag.task_dict[step.name], MappedOperator) == step.per_shard, step.name
    assert dag.task_dict["select"].queue == "default"


def test_the_graph_check_sees_a_declaration_that_drifts_from_the_dag(dagbag: Any) -> None:
    """Break the rule on purpose: expire declared after aggregates instead of neighbours."""
    drifted = Pipeline(tuple(replace(s, after=("aggregates",)) if s.name == "expire" else s for s in PRECOMPUTE.steps))
    missing = declared_edges(drifted) - dag_edges(dagbag.dags["solaris_precompute"])
    assert missing == {("aggregates", "expire")}
