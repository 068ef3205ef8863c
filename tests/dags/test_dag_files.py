"""The DAG folder as Airflow parses it: no import errors, documented, retried, and light at the top level."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from typing import Any

from solaris.airflow_env import DAGS_FOLDER, GPU_POOL

HEAVY = ("torch", "mlflow", "faiss", "pandas", "sqlalchemy", "numpy", "pyarrow", "solaris")


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
    schema = {name: dag.params.get_param(name).schema for name in dag.params}
    assert set(schema) == {"top_fraction", "ttl_hours", "shards", "batch_size", "device"}
    for name in ("top_fraction", "ttl_hours", "shards", "batch_size"):
        assert {"type", "minimum", "maximum"} <= set(schema[name]), name
    assert schema["device"]["enum"] == ["auto", "cpu", "cuda"]
    shard = dag.task_dict["embed_shard"]
    assert (shard.pool, shard.queue) == (GPU_POOL, "gpu")
    assert isinstance(shard, MappedOperator)
    assert {a.name for a in dag.task_dict["resolve"].inlets} == {"solaris_vm_champion"}
    emitted = {a.name for a in dagbag.dags["solaris_train"].task_dict["announce"].outlets}
    assert "solaris_vm_champion" in emitted


def test_replay_dag_is_triggered_by_hand_with_one_mapped_task_per_seed(dagbag: Any) -> None:
    from airflow.sdk.definitions.mappedoperator import MappedOperator

    dag = dagbag.dags["solaris_replay"]
    assert dag.schedule is None
    assert set(dag.params) == {"preset", "world", "seeds", "top_fraction", "ttl_hours", "sweep"}
    assert dag.params.get_param("seeds").schema["items"] == {"type": "integer", "minimum": 0}
    assert isinstance(dag.task_dict["replay_seed"], MappedOperator)
    assert dag.task_dict["summarize"].upstream_task_ids == {"replay_seed"}


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
