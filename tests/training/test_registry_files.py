"""A registered model loads with no pickle in its files (issue #17 item 8).

Loading a pickle runs whatever code it names, so a registry of pickles is a registry of programs. Every file
of each registered version is read back and none may be a pickle, nor an archive holding one (what
``torch.save`` writes); the loaders must still return the same model. Tiny untrained FM, AE and VM are
logged to this test's own MLflow store: a few seconds, no training.
"""

from __future__ import annotations

import functools
import io
import logging
import pickle
import pickletools
import warnings
import zipfile
from collections.abc import Callable, Iterator
from pathlib import Path

import numpy as np
import pytest
import torch
from mlflow_state import own_registry
from torch import nn

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.models import files
from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.models.features import IdTable
from solaris.models.fm import FMConfig, FoundationModel
from solaris.models.vm import VerticalModel, VMConfig
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, FM_MODEL
from solaris.vms import DEFAULT_VMS

VM = DEFAULT_VMS[0].name
VM_MODEL = DEFAULT_VMS[0].registered_name

PICKLE_SUFFIXES = (".pkl", ".pickle", ".pt", ".pth", ".ckpt", ".joblib")


def is_pickle(data: bytes) -> bool:
    """True when ``data`` is one whole pickle (any protocol): its opcodes run from the first byte to a STOP
    on the last, with a consistent stack (pickletools.dis checks it without executing anything)."""
    stream = io.BytesIO(data)
    try:
        pickletools.dis(stream, out=io.StringIO())
    except Exception:  # noqa: BLE001 - anything that does not parse is not a pickle
        return False
    return bool(data) and stream.tell() == len(data)


def pickles_in(root: Path) -> list[str]:
    """Every file under ``root`` that is a pickle, is named like one, or is a zip archive holding one."""
    found = []
    for path in sorted(p for p in root.rglob("*") if p.is_file()):
        name = str(path.relative_to(root))
        data = path.read_bytes()
        if path.suffix in PICKLE_SUFFIXES or is_pickle(data):
            found.append(name)
        elif zipfile.is_zipfile(io.BytesIO(data)):
            with zipfile.ZipFile(io.BytesIO(data)) as archive:
                inside = [m for m in archive.namelist() if m.endswith(PICKLE_SUFFIXES) or is_pickle(archive.read(m))]
            found += [f"{name}:{m}" for m in inside]
    return found


def tiny_models() -> dict[str, nn.Module]:
    """FM, AE and VM small enough to log in a fraction of a second, with two side features on items."""
    users = IdTable(features=np.arange(1, 6, dtype=np.int64)[:, None] % 3, names=("u_group",))
    items = IdTable(np.stack([np.arange(41) % 4, np.arange(41) % 5], 1).astype(np.int64), ("i_a", "i_b"))
    torch.manual_seed(0)
    fm = FoundationModel(FMConfig(history=4, id_dim=4, heads=2, hidden=8, embedding_dim=6), users, items)
    sample = np.random.default_rng(0).normal(size=(32, 6)).astype(np.float32)
    ae = Autoencoder(AEConfig(input_dim=6, code_dim=3, hidden=5, fm_version="1"), sample)
    vm_config = VMConfig(variant="solaris", code_dim=3, id_dim=4, context_dim=2, hidden=(8, 4), embedding_version="e")
    vm = VerticalModel(vm_config, users, items)
    for model in (fm, vm):  # away from their near-zero start, so a load that drops a tensor shows
        with torch.no_grad():
            for p in model.parameters():
                p.add_(torch.randn_like(p) * 0.3)
    return {FM_MODEL: fm.eval(), AE_MODEL: ae.eval(), VM_MODEL: vm.eval()}


def example(model: nn.Module) -> np.ndarray:
    x = np.random.default_rng(1).uniform(0, 3, size=(5, len(model.config.columns()))).astype(np.float32)
    x[:, :2] = [[1, 2], [2, 7], [3, 40], [4, 0], [99, 99]]  # known ids and unknown ones
    return x


LOADERS: dict[str, Callable[[str], nn.Module]] = {
    FM_MODEL: registry.load_fm,
    AE_MODEL: registry.load_ae,
    VM_MODEL: functools.partial(registry.load_vm, VM),
}


@pytest.fixture
def client(settings: Settings) -> Iterator[MlflowClient]:
    with own_registry(settings) as own:
        yield own


class Said(logging.Handler):
    """What MLflow logs: its loggers do not propagate to the root, where caplog listens."""

    def __init__(self) -> None:
        super().__init__(logging.DEBUG)
        self.messages: list[str] = []

    def emit(self, record: logging.LogRecord) -> None:
        self.messages.append(record.getMessage())


def test_a_registered_model_loads_with_no_pickle_in_its_files(
    client: MlflowClient, settings: Settings, tmp_path: Path
) -> None:
    models = tiny_models()
    said, mlflow_logger = Said(), logging.getLogger("mlflow")
    mlflow_logger.addHandler(said)
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-files"))
    try:
        with warnings.catch_warnings(record=True) as warned, mlflow.start_run():
            warnings.simplefilter("always")
            versions = {
                name: registry.log_model(client, m, name, m.config.columns(), example(m)[:3], {"role": name})
                for name, m in models.items()
            }
    finally:
        mlflow_logger.removeHandler(said)
    assert not [m for m in said.messages + [str(w.message) for w in warned] if "pickle" in m.lower()]

    for name, version in versions.items():
        local = Path(mlflow.artifacts.download_artifacts(f"models:/{name}/{version}", dst_path=str(tmp_path / name)))
        listed = {str(p.relative_to(local)) for p in local.rglob("*") if p.is_file()}
        assert {"MLmodel", f"artifacts/{files.FOLDER}/{files.WEIGHTS_FILE}"} <= listed, listed
        assert pickles_in(local) == [], f"{name} version {version} holds pickles"

        original, loaded = models[name], LOADERS[name](version)
        assert type(loaded) is type(original) and loaded.config == original.config and not loaded.training
        expected = original.state_dict()
        assert loaded.state_dict().keys() == expected.keys()
        for key, tensor in loaded.state_dict().items():
            assert torch.equal(tensor, expected[key]), key
        x = torch.from_numpy(example(original))
        with torch.inference_mode():
            np.testing.assert_array_equal(loaded(x).numpy(), original(x).numpy())
    assert client.get_model_version(VM_MODEL, versions[VM_MODEL]).tags["role"] == VM_MODEL


class Tripwire:
    """Unpickling this touches ``marker``: proof that a loader ran a pickle."""

    def __init__(self, marker: Path) -> None:
        self.marker = marker

    def __reduce__(self) -> tuple[Callable[[Path], None], tuple[Path]]:
        return Path.touch, (self.marker,)


def test_a_version_without_model_files_is_refused_not_unpickled(client: MlflowClient, tmp_path: Path) -> None:
    """A version logged the old way (a pickle under data/) is an error naming the cure; its pickle never runs."""
    marker, old = tmp_path / "unpickled", tmp_path / "old_model"
    (old / "data").mkdir(parents=True)
    (old / "data" / "model.pth").write_bytes(pickle.dumps(Tripwire(marker)))
    (old / "MLmodel").write_text("flavors: {}\n")
    client.create_registered_model(VM_MODEL)
    version = client.create_model_version(VM_MODEL, source=str(old)).version
    with pytest.raises(ValueError, match=f"{VM_MODEL} version {version} has no spec.json.*train it again"):
        registry.load_vm(VM, str(version))
    assert not marker.exists()
    assert pickles_in(old) == ["data/model.pth"]  # the check above sees such a file


def test_the_pickle_check_finds_what_torch_save_writes(tmp_path: Path) -> None:
    """Not vacuous: ``torch.save`` output and plain pickles are found; the safe files are not."""
    vm = tiny_models()[VM_MODEL]
    torch.save(vm, tmp_path / "whole.bin")  # a zip holding data.pkl, whatever the name
    torch.save(vm.state_dict(), tmp_path / "state.pt")
    (tmp_path / "protocol0").write_bytes(pickle.dumps({"a": 1}, protocol=0))
    files.save(vm, tmp_path / "safe")
    assert pickles_in(tmp_path) == ["protocol0", "state.pt", "whole.bin:whole/data.pkl"]
    assert pickles_in(tmp_path / "safe") == []
    assert files.load(tmp_path / "safe").config == vm.config
