"""The training knobs a person sets (``solaris train --epochs``, the ``solaris_train`` DAG's form), declared
once and away from torch, so that a DAG file imports them and still parses fast."""

from __future__ import annotations

EPOCHS = 12  # a cap: early stopping ends most fits sooner
MAX_EPOCHS = 100
