"""A training task lowers its own CPU priority, so a day's training cannot make the hourly precompute late."""

from __future__ import annotations

import os

from solaris.training.steps import TRAINING_NICENESS, yield_cpu


def test_a_training_task_runs_at_the_lowest_priority_once_however_often_it_asks() -> None:
    child = os.fork()  # the priority is the process's own: a child's change leaves the test process as it is
    if child == 0:
        yield_cpu()
        yield_cpu()
        os._exit(os.nice(0))
    _, status = os.waitpid(child, 0)
    assert os.waitstatus_to_exitcode(status) == TRAINING_NICENESS == 19
