"""A VM whose label never occurs in its training hours is refused by name, before any model is fitted."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from solaris.config import Settings
from solaris.training.jobs import TrainPlan, train_vm_variants
from solaris.vms import DEFAULT_VMS
from tests.models.test_vm_inputs import examples


def test_a_vm_with_no_positive_in_its_training_hours_is_refused_naming_it(tmp_path: Path) -> None:
    n = 8
    clicks_only = np.zeros((n, 2), np.float32)
    clicks_only[::2, 0] = 1  # clicks, and no conversion: MovieLens's ratings
    codes = np.zeros((n, 2), np.float32)
    data = examples(np.zeros((n, 10), np.float32), codes, np.ones(n), codes, labels=clicks_only)
    spans = {"vm_train": data, "valid": data, "eval": data}
    settings = Settings.from_env({"SOLARIS_HOME": str(tmp_path)})
    with pytest.raises(ValueError, match=r"VM cvr \(conversion\): no training impression has a conversion") as raised:
        train_vm_variants(None, settings, None, spans, DEFAULT_VMS[1], TrainPlan())  # type: ignore[arg-type]
    assert str(settings.vms_file) in str(raised.value)
