"""The ``python_function`` face of a registered SOLARIS model, logged as code ("models from code").

MLflow stores this file's source with each model version instead of a cloudpickled object, so that the
registry's UI, ``mlflow.pyfunc.load_model`` and ``mlflow models serve`` work on the saved files
(``solaris.models.files``). SOLARIS's own loaders (``solaris.tracking.registry.load_*``) never run this
file: they read the two files directly.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import numpy as np
import pandas as pd
import torch
from mlflow.pyfunc import PythonModel, PythonModelContext

import mlflow
from solaris.models import files


class SolarisPyfunc(PythonModel):
    """Rows of the model's named input columns in, its forward pass out (as the PyTorch flavour served)."""

    def load_context(self, context: PythonModelContext) -> None:
        self.model = files.load(Path(context.artifacts[files.FOLDER]))

    def predict(
        self, context: PythonModelContext, model_input: pd.DataFrame, params: dict[str, Any] | None = None
    ) -> np.ndarray:
        x = torch.from_numpy(np.array(model_input, dtype=np.float32))  # a copy: pandas may hand a read-only view
        with torch.inference_mode():
            return self.model(x).numpy()


mlflow.models.set_model(SolarisPyfunc())
