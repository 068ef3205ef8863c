"""``solaris_replay`` run through Airflow (``dag.test()``): the tiny preset, one seed, no sweep. The mapped seed
task writes its report, the summary task checks its invariants, the plan task skips (no arms), and the run
succeeds. About 2.5 minutes of
CPU: an integration test (``make test-integration``, which ``.ci/run`` runs after the suite)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from mlflow_state import own_registry
from precompute_env import export

from solaris.config import Settings
from solaris.eval.figures import ReplayReport

pytestmark = pytest.mark.integration


def _task_states(dag_run: Any) -> dict[str, str]:
    from airflow.utils.session import create_session

    with create_session() as session:
        return {ti.task_id: str(ti.state) for ti in dag_run.get_task_instances(session=session)}


def test_replay_dag_runs_end_to_end(dagbag: Any, tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    export(settings, monkeypatch)
    with own_registry(settings):  # the replay points MLflow at its own registry: the session's is put back
        dag_run = dagbag.dags["solaris_replay"].test(
            run_conf={"preset": "tiny", "seeds": [0], "sweep": False, "speculation": False}
        )

    assert dag_run.state == "success", _task_states(dag_run)
    states = {"seeds": "success", "replay_seed": "success", "summarize": "success", "plan": "skipped"}
    assert _task_states(dag_run) == states  # no arms, no plan
    folder = settings.data_dir / "replay" / "tiny" / "seed-0" / "report"
    report = ReplayReport.from_json((folder / "report.json").read_text())
    assert (folder / "report.html").is_file() and report.hours and not report.sweep and not report.speculation
