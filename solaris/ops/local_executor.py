"""The local stack's executor: Airflow's LocalExecutor, its workers forked with the tasks' code imported.

Every SOLARIS task imports torch, pandas, pyarrow and MLflow, about 2 s on 2 cores, and many steps of the
hourly run then work for less than that. LocalExecutor forks its workers from the scheduler and each task
process from a worker, so importing that code once, before the workers fork, spares it to every task: on the
tiny world an hourly run through Airflow takes about half as long. As with any long-lived worker, code
changed under a running stack is seen after ``solaris stack down`` and ``up``.
"""

from __future__ import annotations

import importlib

from airflow.executors.local_executor import LocalExecutor

# What the DAGs' tasks import: the precompute's nodes (torch, pandas, pyarrow, SQLAlchemy, MLflow) and the
# training steps.
PRELOADED = ("solaris.precompute.nodes", "solaris.precompute.run", "solaris.training.steps")


class PreloadingLocalExecutor(LocalExecutor):
    def start(self) -> None:
        for module in PRELOADED:
            importlib.import_module(module)
        super().start()
