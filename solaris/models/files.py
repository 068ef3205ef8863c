"""A model as two plain files: ``spec.json`` (its class and constructor arguments) and ``weights.safetensors``.

Why not ``torch.save(model)``: that is a pickle, and loading a pickle runs whatever code it names, so a
model file could execute anything, and it breaks when a class moves. Here loading parses JSON and reads
raw tensors, then builds the class from this package's own code. The side-feature tables are registered
buffers, so they travel with the weights; the spec holds only what is not a tensor.
"""

from __future__ import annotations

import dataclasses
import json
from pathlib import Path
from typing import Any

import numpy as np
import torch
from safetensors.torch import load as load_tensors
from safetensors.torch import save_file
from torch import nn

from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.models.demand import DemandConfig, DemandModel
from solaris.models.features import IdTable
from solaris.models.fm import FMConfig, FoundationModel
from solaris.models.vm import VerticalModel, VMConfig

SPEC_FILE, WEIGHTS_FILE = "spec.json", "weights.safetensors"
FOLDER = "solaris_model"  # the folder that holds the two files among a logged model's artifacts
FORMAT = 1
KINDS: dict[str, type[nn.Module]] = {
    "fm": FoundationModel,
    "ae": Autoencoder,
    "vm": VerticalModel,
    "demand": DemandModel,
}


def save(model: nn.Module, folder: Path) -> None:
    """Write ``model``'s spec and weights into ``folder`` (created if missing)."""
    kind = next((k for k, cls in KINDS.items() if type(model) is cls), None)
    if kind is None:
        raise TypeError(
            f"cannot save a {type(model).__name__}: not one of {', '.join(c.__name__ for c in KINDS.values())}"
        )
    spec: dict[str, Any] = {"format": FORMAT, "kind": kind, "config": dataclasses.asdict(model.config)}
    if kind in ("fm", "vm"):
        spec["side_features"] = {"user": list(model.user.names), "item": list(model.item.names)}
    folder.mkdir(parents=True, exist_ok=True)
    (folder / SPEC_FILE).write_text(json.dumps(spec, indent=2, sort_keys=True))
    tensors = {name: t.detach().cpu().contiguous() for name, t in model.state_dict().items()}
    save_file(tensors, str(folder / WEIGHTS_FILE), metadata={"format": str(FORMAT), "kind": kind})


def load(folder: Path) -> nn.Module:
    """The model saved in ``folder``, on the CPU, in eval mode."""
    spec = json.loads((folder / SPEC_FILE).read_text())
    if spec.get("format") != FORMAT or spec.get("kind") not in KINDS:
        found = f"format {spec.get('format')!r}, kind {spec.get('kind')!r}"
        raise ValueError(f"{folder / SPEC_FILE}: not a SOLARIS model spec of format {FORMAT} ({found})")
    state = load_tensors((folder / WEIGHTS_FILE).read_bytes())
    model = _build(spec, state)
    model.load_state_dict(state, strict=True)
    return model.eval()


def _build(spec: dict[str, Any], state: dict[str, torch.Tensor]) -> nn.Module:
    """An instance of the spec's class whose shapes match ``state``; its values come from ``state`` next."""
    kind, raw = spec["kind"], spec["config"]
    if kind == "ae":
        config = _config(AEConfig, raw)
        return Autoencoder(config, np.zeros((1, config.input_dim), np.float32))
    if kind == "demand":
        config = _config(DemandConfig, raw)
        return DemandModel(config, np.zeros((1, len(config.features)), np.float32))
    names = spec["side_features"]
    if "user.trained" not in state:
        raise ValueError(
            f"a {kind.upper()} saved before models recorded which ids they were trained on (and before VMs read "
            "exposure counters): train it again"
        )
    users = IdTable(state["user.features"].numpy(), tuple(names["user"]))
    items = IdTable(state["item.features"].numpy(), tuple(names["item"]))
    if kind == "fm":
        return FoundationModel(_config(FMConfig, raw), users, items)
    return VerticalModel(_config(VMConfig, raw), users, items)


def _config(cls: type, raw: dict[str, Any]) -> Any:
    """The dataclass back from its JSON: JSON has lists where the config has tuples."""
    return cls(**{k: tuple(v) if isinstance(v, list) else v for k, v in raw.items()})
