"""A training run's steps on a live stack: each lowers its own CPU priority, so a day's training cannot make
the hourly precompute late, and each trains on the log as of the run's logical time."""

from __future__ import annotations

import os
from datetime import timedelta
from pathlib import Path

from solaris.config import Settings
from solaris.data.synthetic import PRESETS, generate_world
from solaris.live.traffic import LiveWorld
from solaris.training.steps import TRAINING_NICENESS, _world, plan, yield_cpu


def test_a_training_task_runs_at_the_lowest_priority_once_however_often_it_asks() -> None:
    child = os.fork()  # the priority is the process's own: a child's change leaves the test process as it is
    if child == 0:
        yield_cpu()
        yield_cpu()
        os._exit(os.nice(0))
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == TRAINING_NICENESS == 19


def test_every_step_of_a_training_run_sees_the_log_before_its_logical_time(tmp_path: Path) -> None:
    """On a live stack hours keep arriving while a chain trains: a step that opened the whole log would train
    (and gate) on hours after the run's time, and on other hours than the step before it."""
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path), "SOLARIS_WORLD": "tiny"})
    log = generate_world(PRESETS["tiny"].with_overrides(n_users=60, days=2), settings.world_dir(), hours=40)
    until = log.start + timedelta(hours=30)
    before = _world(settings, plan(settings, 1, 0), until).split
    LiveWorld(log.root).write_next()  # an hour lands mid-run
    after = _world(settings, plan(settings, 1, 0), until).split
    assert before == after and before.eval.end == until
