"""Training loops: seeded, early-stopped on the validation hours, with progress bars and CPU-sized defaults.

One generic :func:`fit` drives every model; the three trainers only say where batches come from and what the
loss is. The best epoch's weights are restored, so the returned model is the one the metrics describe.
"""

from __future__ import annotations

import copy
import time
from collections.abc import Callable, Iterable
from dataclasses import asdict, dataclass, field, replace

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F
from tqdm.auto import tqdm

from solaris.data.eventlog import EventLog
from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.models.features import HistoryIndex, IdTable, fm_matrix, labels
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.loader import minibatches, stream_impressions
from solaris.models.splits import Span
from solaris.models.vm import VerticalModel, VMConfig, from_base
from solaris.models.vm_data import VMData
from solaris.training_knobs import EPOCHS

Batch = tuple[torch.Tensor, torch.Tensor]
EpochHook = Callable[[int, float, float], None]  # (epoch, train loss, validation loss), e.g. an MLflow logger


@dataclass(frozen=True)
class FitConfig:
    epochs: int = EPOCHS
    patience: int = 1
    lr: float = 2e-3
    weight_decay: float = 1e-6
    # Coupled L2 on id embedding rows too. Under Adam it moves every row no batch reached toward zero by about
    # ``lr`` a step whatever the decay's size: a strong regulariser of id rows, without which the FM overfits
    # them in its first epoch (0.905 against 0.868 NE on the plain world, ablations/fm_new_ids.py). A row no
    # step reached is never served (it takes the unknown row), and the unknown row is trained by hiding ids.
    embedding_decay: bool = True
    batch_size: int = 512
    block_hours: int = 12
    seed: int = 0
    progress: bool = True
    threads: int | None = None  # torch intra-op threads; 1 beats 2 on a shared 2-core machine

    def as_params(self) -> dict[str, object]:
        return asdict(self)


@dataclass
class FitResult:
    """``best_epoch`` -1 with a ``start_loss``: no epoch beat the weights training started from, which were kept."""

    train_loss: list[float] = field(default_factory=list)
    valid_loss: list[float] = field(default_factory=list)
    best_epoch: int = -1
    seconds: float = 0.0
    start_loss: float | None = None

    @property
    def best_valid_loss(self) -> float:
        return self.valid_loss[self.best_epoch] if self.best_epoch >= 0 else float(self.start_loss)


def seed_everything(seed: int) -> np.random.Generator:
    torch.manual_seed(seed)
    return np.random.default_rng(seed)


def fit(
    model: nn.Module,
    batches: Callable[[np.random.Generator], Iterable[Batch]],
    loss_fn: Callable[[nn.Module, torch.Tensor, torch.Tensor], torch.Tensor],
    validate: Callable[[nn.Module], float],
    config: FitConfig,
    desc: str,
    on_epoch: EpochHook | None = None,
    keep_start: bool = False,
) -> FitResult:
    """Train until the validation loss stops improving for ``patience`` epochs; keep the best weights.
    ``keep_start``: the weights training starts from compete too, so a model trained further from a good
    start is never worse on the validation hours than that start."""
    rng = seed_everything(config.seed)
    if config.threads:
        torch.set_num_threads(config.threads)
    optimiser = torch.optim.Adam(param_groups(model, config), lr=config.lr)
    result, best_state, started = FitResult(), copy.deepcopy(model.state_dict()), time.perf_counter()
    if keep_start:
        model.eval()
        with torch.inference_mode():
            result.start_loss = validate(model)
    for epoch in range(config.epochs):
        model.train()
        total, rows = 0.0, 0
        for x, y in tqdm(batches(rng), desc=f"{desc} epoch {epoch + 1}", disable=not config.progress, leave=False):
            optimiser.zero_grad(set_to_none=True)
            loss = loss_fn(model, x, y)
            loss.backward()
            optimiser.step()
            total, rows = total + float(loss.detach()) * len(x), rows + len(x)
        model.eval()
        with torch.inference_mode():
            valid = validate(model)
        result.train_loss.append(total / max(rows, 1))
        result.valid_loss.append(valid)
        if on_epoch is not None:
            on_epoch(epoch, result.train_loss[-1], valid)
        if (result.best_epoch < 0 and result.start_loss is None) or valid < result.best_valid_loss:
            result.best_epoch, best_state = epoch, copy.deepcopy(model.state_dict())
        elif epoch - result.best_epoch >= config.patience:
            break
    model.load_state_dict(best_state)
    model.eval()
    result.seconds = time.perf_counter() - started
    return result


def param_groups(model: nn.Module, config: FitConfig) -> list[dict[str, object]]:
    """The model's parameters with their weight decay: none on embedding tables unless ``embedding_decay``."""
    tables = {id(m.weight) for m in model.modules() if isinstance(m, nn.Embedding)}
    decay_tables = config.weight_decay if config.embedding_decay else 0.0
    return [
        {"params": [p for p in model.parameters() if id(p) not in tables], "weight_decay": config.weight_decay},
        {"params": [p for p in model.parameters() if id(p) in tables], "weight_decay": decay_tables},
    ]


def _tensors(*arrays: np.ndarray) -> tuple[torch.Tensor, ...]:
    return tuple(torch.as_tensor(a, dtype=torch.float32) for a in arrays)


def fm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    """Click and conversion BCE, summed: both tasks shape the shared embedding."""
    return F.binary_cross_entropy_with_logits(model.outputs(x)[1], y, reduction="mean") * y.shape[1]


def train_fm(
    log: EventLog,
    train: Span,
    valid: Span,
    index: HistoryIndex,
    users: IdTable,
    items: IdTable,
    config: FMConfig = FMConfig(),
    fit_config: FitConfig = FitConfig(),
    on_epoch: EpochHook | None = None,
    start_from: FoundationModel | None = None,
) -> tuple[FoundationModel, FitResult]:
    """Train the FM on ``train`` hours, streamed block by block; early-stop on ``valid``. ``start_from``: a
    copy of that FM is fine-tuned instead (the daily refresh: same vocabularies, weights carried over)."""
    seed_everything(fit_config.seed)
    if start_from is None:
        model = FoundationModel(config, users, items)
        model.start_at_base_rates(labels(log.impressions(train.start, train.end, ["click", "conversion"])).mean(axis=0))
    else:
        model, config = copy.deepcopy(start_from), start_from.config
    valid_table = log.impressions(valid.start, valid.end)
    vx, vy = _tensors(fm_matrix(valid_table, index, config.history), labels(valid_table))

    def batches(rng: np.random.Generator) -> Iterable[Batch]:
        for table in stream_impressions(log, train, fit_config.block_hours, rng):
            arrays = (fm_matrix(table, index, config.history), labels(table))
            for x, y in minibatches(arrays, fit_config.batch_size, rng):
                yield _tensors(x, y)

    result = fit(model, batches, fm_loss, lambda m: float(fm_loss(m, vx, vy)), fit_config, "FM", on_epoch)
    return model, result


def embed_span(
    log: EventLog, span: Span, index: HistoryIndex, fm: FoundationModel, max_rows: int, seed: int, device: str
) -> np.ndarray:
    """FM embeddings of up to ``max_rows`` impressions of ``span`` (a seeded sample), for AE training."""
    parts = [
        embed(fm, fm_matrix(t, index, fm.config.history), device=device).embedding
        for t in stream_impressions(log, span, 24)
    ]
    if not parts:
        raise ValueError(f"no impressions in {span} to embed")
    every = np.concatenate(parts)
    if every.shape[0] <= max_rows:
        return every
    return every[np.random.default_rng(seed).choice(every.shape[0], max_rows, replace=False)]


def train_ae(
    train: np.ndarray,
    valid: np.ndarray,
    config: AEConfig = AEConfig(),
    fit_config: FitConfig = FitConfig(),
    on_epoch: EpochHook | None = None,
    start_from: Autoencoder | None = None,
) -> tuple[Autoencoder, FitResult]:
    """``start_from``: fine-tune a copy of that AE (its standardisation kept, so codes stay comparable)."""
    seed_everything(fit_config.seed)
    if start_from is None:
        model = Autoencoder(config, train)
    else:
        model = copy.deepcopy(start_from)
        model.config = config
    (vx,) = _tensors(valid)

    def loss(m: nn.Module, x: torch.Tensor, _: torch.Tensor) -> torch.Tensor:
        return m.reconstruction_error(x).mean()

    def batches(rng: np.random.Generator) -> Iterable[Batch]:
        for (x,) in minibatches((train,), fit_config.batch_size, rng):
            (t,) = _tensors(x)
            yield t, t

    def valid_loss(m: nn.Module) -> float:
        return float(m.reconstruction_error(vx).mean())

    result = fit(model, batches, loss, valid_loss, fit_config, "AE", on_epoch)
    return model, result


def vm_loss(model: nn.Module, x: torch.Tensor, y: torch.Tensor) -> torch.Tensor:
    return F.binary_cross_entropy_with_logits(model.logits(x), y)


def train_vm(
    train: VMData,
    valid: VMData,
    users: IdTable,
    items: IdTable,
    config: VMConfig = VMConfig(),
    fit_config: FitConfig = FitConfig(),
    on_epoch: EpochHook | None = None,
    base: VerticalModel | None = None,
) -> tuple[VerticalModel, FitResult]:
    """Train one VM variant; validation scores hard labels with the pair tier's served coverage.

    An embedding variant records the training data's embedding version, so it can never be fed others.
    ``base``: a trained base VM. The variant is then trained twice, from scratch and from ``base``
    (:func:`~solaris.models.vm.from_base`, that start kept unless an epoch beats it), and the one better on the
    validation hours is kept: never worse there than the base VM, and nothing a fresh start learns is lost (on a
    short log, from the base alone stopped at the base VM's NE where from scratch gained 0.04). The kept fit's
    ``start_loss`` is set when it started from ``base``.
    """
    if config.uses_embeddings:
        config = replace(config, embedding_version=train.embedding_version)
    vx, vy = _tensors(valid.served_like(config), valid.label)
    targets = train.targets(config)

    def batches(rng: np.random.Generator) -> Iterable[Batch]:
        pair_flag = (rng.random(len(train)) < config.coverage).astype(np.float32)
        for x, y in minibatches((train.matrix(config, pair_flag), targets), fit_config.batch_size, rng):
            yield _tensors(x, y)

    def valid_loss(m: nn.Module) -> float:
        return float(vm_loss(m, vx, vy))

    def trained_from(start: VerticalModel | None) -> tuple[VerticalModel, FitResult]:
        seed_everything(fit_config.seed)
        if start is None:
            model = VerticalModel(config, users, items)
            model.start_at_base_rate(float(train.label.mean()))
        else:
            model = from_base(start, config)
        desc = f"VM {config.variant}" + (" from base" if start is not None else "")
        return model, fit(model, batches, vm_loss, valid_loss, fit_config, desc, keep_start=start is not None)

    candidates = [trained_from(None)] + ([trained_from(base)] if base is not None else [])
    model, result = min(candidates, key=lambda c: c[1].best_valid_loss)
    if on_epoch is not None:  # the kept fit's curve only: two runs' epochs under one step would interleave
        for epoch, (train_loss, valid_loss_) in enumerate(zip(result.train_loss, result.valid_loss)):
            on_epoch(epoch, train_loss, valid_loss_)
    return model, result


def refresh_vm(
    model: VerticalModel,
    train: tuple[np.ndarray, np.ndarray],
    valid: tuple[np.ndarray, np.ndarray],
    fit_config: FitConfig,
    desc: str,
    keep_start: bool = False,
) -> tuple[VerticalModel, FitResult]:
    """A copy of ``model`` trained further on (inputs, targets) of recent hours: the refresh that keeps every
    variant equally fresh. Inputs are taken as they are (features as served carry their real coverage);
    ``keep_start``: see :func:`fit`."""
    refreshed = copy.deepcopy(model)
    vx, vy = _tensors(*valid)

    def batches(rng: np.random.Generator) -> Iterable[Batch]:
        for x, y in minibatches(train, fit_config.batch_size, rng):
            yield _tensors(x, y)

    result = fit(
        refreshed, batches, vm_loss, lambda m: float(vm_loss(m, vx, vy)), fit_config, desc, keep_start=keep_start
    )
    return refreshed, result
