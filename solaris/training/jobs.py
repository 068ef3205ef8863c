"""Training jobs with their MLflow record: ``train fm``, ``train ae``, ``train vm`` and the whole chain.

Each job runs in its own experiment, logs params, per-epoch losses and the loss curve, registers its model
with the tags that link it to what it depends on, and moves the ``challenger`` alias. :func:`train_all` trains
every configured VM (:mod:`solaris.vms`) on one new FM and AE and gates them as one chain; :func:`train_vm_alone`
trains one VM on the champion FM and AE and gates it on its own.
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field, replace
from datetime import datetime
from pathlib import Path

import numpy as np

import mlflow
from mlflow import MlflowClient
from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.data.schema import ITEM_FEATURE_PREFIX, USER_FEATURE_PREFIX
from solaris.models import metrics
from solaris.models.autoencoder import AEConfig, Autoencoder
from solaris.models.cost import flops_per_pair, parameter_count
from solaris.models.features import HistoryIndex, IdTable, fm_matrix, labels
from solaris.models.fm import FMConfig, FoundationModel, embed
from solaris.models.splits import DEFAULT_FRACTIONS, Span, TimeSplit
from solaris.models.training import FitConfig, embed_span, train_ae, train_fm, train_vm
from solaris.models.vm import BASE_VARIANT, VerticalModel, VMConfig, score
from solaris.models.vm import VARIANTS as VM_VARIANTS
from solaris.models.vm_data import Teacher, VMData, build_vm_data, build_vm_datasets
from solaris.precompute.params import PrecomputeParams
from solaris.tracking import registry
from solaris.tracking.registry import AE_MODEL, CHALLENGER, CHAMPION, FM_MODEL, PinnedVersions
from solaris.training import runs
from solaris.training.gate import ChainDecision, Challenger, promotion_gate
from solaris.vms import VMSpec

HISTORY_COLUMNS = ["user_id", "ts", "item_id", "click", "conversion"]
TRAINED_UNTIL = "trained_until"  # FM version tag: the end of the last hour whose labels it saw


@dataclass(frozen=True)
class TrainPlan:
    fm: FMConfig = FMConfig()
    ae: AEConfig = AEConfig()
    vm: VMConfig = VMConfig()
    fit: FitConfig = FitConfig()
    # The FM's own stopping rule and weight decay: with patience 1 its validation hours' noise stopped it after
    # one or two epochs; on MovieLens its refreshed version was 0.003-0.010 NE worse (ablations/fm_fit.py).
    fm_patience: int = 3
    fm_weight_decay: float = 1e-4
    fractions: tuple[float, ...] = DEFAULT_FRACTIONS
    ae_rows: int = 100_000
    serve_variant: str = "solaris"
    variants: tuple[str, ...] = VM_VARIANTS
    device: str = "auto"
    # How old a served pair code gets: validation and the gate see codes that old (the precompute's TTL).
    served_age_hours: int = PrecomputeParams().ttl_hours

    @property
    def fm_fit(self) -> FitConfig:
        """The shared fit settings with the FM's patience and weight decay."""
        return replace(self.fit, patience=self.fm_patience, weight_decay=self.fm_weight_decay)


@dataclass(frozen=True)
class World:
    """An event log opened for training: its split, history index and side-feature tables."""

    log: EventLog
    split: TimeSplit
    index: HistoryIndex
    users: IdTable
    items: IdTable

    @classmethod
    def open(cls, root: Path, fractions: tuple[float, ...] = DEFAULT_FRACTIONS, until: datetime | None = None) -> World:
        """The log at ``root``, split over its hours before ``until`` (default: all of them)."""
        log = EventLog(Path(root))
        hours = [h for h in log.hours() if until is None or h < until]
        return cls(
            log=log,
            split=TimeSplit.from_hours(hours, fractions, f"event log {log.root}"),
            index=HistoryIndex.from_table(log.impressions(log.start, log.end, HISTORY_COLUMNS)),
            users=IdTable.from_table(log.users(), "user_id", USER_FEATURE_PREFIX),
            items=IdTable.from_table(log.items(), "item_id", ITEM_FEATURE_PREFIX),
        )


@dataclass(frozen=True)
class Trained:
    model: object
    version: str
    metrics: dict[str, float]


@dataclass
class TrainReport:
    fm: Trained
    ae: Trained
    vms: dict[str, dict[str, Trained]] = field(default_factory=dict)  # VM name -> variant -> what it trained
    decision: ChainDecision | None = None


def _eval_tags(world: World, eval_metrics: dict[str, float]) -> dict[str, str]:
    return {"eval_ne": f"{eval_metrics['ne']:.6f}", "eval_hours": str(world.split.eval)}


def fm_eval(world: World, fm: FoundationModel, span: Span, device: str) -> dict[str, float]:
    table = world.log.impressions(span.start, span.end)
    probs = embed(fm, fm_matrix(table, world.index, fm.config.history), device=device).probs
    return metrics.summary(labels(table)[:, 0], probs[:, 0])


def train_fm_job(client: MlflowClient, settings: Settings, world: World, plan: TrainPlan) -> Trained:
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-fm"))
    with mlflow.start_run(run_name="fm"):
        runs.log_params({**plan.fm.as_params(), **plan.fm_fit.as_params(), **world.split.as_params()})
        split = world.split
        fm, fit = train_fm(
            world.log,
            split.fm_train,
            split.valid,
            world.index,
            world.users,
            world.items,
            plan.fm,
            plan.fm_fit,
            runs.log_epoch,
        )
        runs.log_fit(fit, "FM")
        found = fm_eval(world, fm, world.split.eval, plan.device)
        sample = world.log.impressions(world.split.valid.start, world.split.valid.end).slice(0, 64)
        example = fm_matrix(sample, world.index, plan.fm.history)
        cost = {"params": parameter_count(fm), "flops_per_pair": flops_per_pair(fm, example)}
        mlflow.log_metrics({f"eval_{k}": v for k, v in found.items()} | cost)
        tags = {"role": "fm", "embedding_dim": plan.fm.embedding_dim, **_eval_tags(world, found)}
        tags[TRAINED_UNTIL] = split.valid.end.isoformat()  # early stopping reads labels too
        version = registry.log_model(client, fm, FM_MODEL, plan.fm.columns(), example[:5], tags)
    registry.set_alias(client, FM_MODEL, CHALLENGER, version)
    return Trained(fm, version, found | cost)


def train_ae_job(client: MlflowClient, settings: Settings, world: World, fm: Trained, plan: TrainPlan) -> Trained:
    """AE on FM embeddings of FM-train pairs; reports reconstruction error on the validation hours."""
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-ae"))
    config = replace(plan.ae, input_dim=fm.model.config.embedding_dim, fm_version=fm.version)
    with mlflow.start_run(run_name="ae"):
        runs.log_params({**config.as_params(), **plan.fit.as_params()})
        split, seed = world.split, plan.fit.seed
        train = embed_span(world.log, split.fm_train, world.index, fm.model, plan.ae_rows, seed, plan.device)
        valid = embed_span(world.log, split.valid, world.index, fm.model, plan.ae_rows, seed, plan.device)
        ae, fit = train_ae(train, valid, config, plan.fit, runs.log_epoch)
        runs.log_fit(fit, "AE")
        found = {"reconstruction_error": fit.best_valid_loss}
        mlflow.log_metrics(found)
        tags = {"role": "ae", "fm_version": fm.version, "code_dim": config.code_dim}
        version = registry.log_model(client, ae, AE_MODEL, config.columns(), valid[:5], tags)
    registry.set_alias(client, AE_MODEL, CHALLENGER, version)
    return Trained(ae, version, found)


def vm_data(world: World, teacher: Teacher, served_age_hours: int) -> dict[str, VMData]:
    """Every VM's examples from one teacher pass; each VM narrows them to its label and positions."""
    split = world.split
    spans = {name: getattr(split, name) for name in ("vm_train", "valid", "eval")}
    return build_vm_datasets(world.log, spans, world.index, teacher, served_age_hours)


def train_vm_job(
    client: MlflowClient,
    settings: Settings,
    world: World,
    own: dict[str, VMData],
    spec: VMSpec,
    variant: str,
    plan: TrainPlan,
    base: VerticalModel | None = None,
) -> Trained:
    """One variant of ``spec`` on its own examples (:meth:`VMData.for_vm`) per span; ``base``: the base VM
    it starts from (see :func:`~solaris.models.training.train_vm`)."""
    mlflow.set_experiment(experiment_id=registry.experiment(client, settings, "solaris-train-vm"))
    config = replace(plan.vm, variant=variant)
    with mlflow.start_run(run_name=f"{spec.name}-{variant}"):
        params = {**config.as_params(), **plan.fit.as_params(), "vm": spec.name, "label": spec.label}
        runs.log_params(params)
        vm, fit = train_vm(
            own["vm_train"], own["valid"], world.users, world.items, config, plan.fit, runs.log_epoch, base
        )
        runs.log_params({"started_from_base": fit.start_loss is not None})
        runs.log_fit(fit, f"VM {spec.name} {variant}")
        found = vm_eval(vm, own["eval"])
        example = own["eval"].matrix(vm.config)[:64]
        cost = {"params": parameter_count(vm), "flops_per_pair": flops_per_pair(vm, example)}
        mlflow.log_metrics({f"eval_{k}": v for k, v in found.items()} | cost)
        version = register_vm(client, world, spec, vm, example[:5], found)
    if variant == plan.serve_variant:
        registry.set_alias(client, spec.registered_name, CHALLENGER, version)
    return Trained(vm, version, found | cost)


def train_vm_variants(
    client: MlflowClient, settings: Settings, world: World, data: dict[str, VMData], spec: VMSpec, plan: TrainPlan
) -> dict[str, Trained]:
    own = {span: examples.for_vm(spec) for span, examples in data.items()}
    if not own["vm_train"].label.any():
        raise ValueError(
            f"VM {spec.describe()}: no training impression has a {spec.label}, so it cannot be learned; declare "
            f"only the VMs this log can train in {settings.vms_file} (SOLARIS_VMS_FILE)"
        )
    trained: dict[str, Trained] = {}
    for v in sorted(plan.variants, key=lambda v: v != BASE_VARIANT):  # the base VM first: the others start from it
        base = trained[BASE_VARIANT].model if BASE_VARIANT in trained else None
        trained[v] = train_vm_job(client, settings, world, own, spec, v, plan, base)  # type: ignore[arg-type]
    return {v: trained[v] for v in plan.variants}


def vm_eval(vm: VerticalModel, data: VMData) -> dict[str, float]:
    return metrics.summary(data.label, score(vm, data.served_like(vm.config)))


def register_vm(
    client: MlflowClient, world: World, spec: VMSpec, vm: VerticalModel, example: np.ndarray, found: dict[str, float]
) -> str:
    """Register a VM version (inside the active run) with the tags the ranker and the gate rely on."""
    tags = {
        "role": "vm",
        "vm": spec.name,
        "label": spec.label,
        "variant": vm.config.variant,
        **_eval_tags(world, found),
    }
    if spec.positions is not None:
        tags["positions"] = f"{spec.positions[0]}-{spec.positions[1]}"
    if vm.config.uses_embeddings:
        tags |= {"embedding_version": vm.config.embedding_version, "code_dim": vm.config.code_dim}
    return registry.log_model(client, vm, spec.registered_name, vm.config.columns(), example, tags)


def served_challenger(spec: VMSpec, variants: dict[str, Trained], teacher: Teacher, plan: TrainPlan) -> Challenger:
    """The served variant of one VM as the gate's challenger."""
    served = variants[plan.serve_variant]
    chain = PinnedVersions(teacher.fm_version, teacher.ae_version, served.version, teacher.embedding_version, spec.name)
    return Challenger(chain, served.metrics["ne"])


def gate_challengers(
    client: MlflowClient, settings: Settings, world: World, challengers: list[Challenger], plan: TrainPlan
) -> ChainDecision:
    """The promotion gate, each champion re-scored on this world's evaluation hours for its own VM. Champions
    of one FM and AE share that teacher's pass over the hours."""
    specs = {s.name: s for s in settings.vms()}

    @functools.cache
    def examples(fm: str, ae: str) -> VMData:
        return champion_examples(world, fm, ae, plan.device, plan.served_age_hours)

    return promotion_gate(
        client,
        settings,
        challengers,
        str(world.split.eval),
        lambda champion: champion_ne(specs[champion.vm_name], champion, examples(champion.fm, champion.ae)),
    )


def train_all(
    settings: Settings, root: Path, plan: TrainPlan = TrainPlan(), until: datetime | None = None
) -> TrainReport:
    """FM -> AE -> every VM variant -> promotion gate for the served variant's chain, on the log's hours
    before ``until`` (default: all)."""
    client = registry.connect(settings)
    world = World.open(root, plan.fractions, until)
    fm = train_fm_job(client, settings, world, plan)
    ae = train_ae_job(client, settings, world, fm, plan)
    teacher = Teacher(fm.model, ae.model, fm.version, ae.version, plan.device)
    data = vm_data(world, teacher, plan.served_age_hours)
    report, specs = TrainReport(fm=fm, ae=ae), settings.vms()
    for spec in specs:
        report.vms[spec.name] = train_vm_variants(client, settings, world, data, spec, plan)
    if plan.serve_variant in plan.variants:
        challengers = [served_challenger(s, report.vms[s.name], teacher, plan) for s in specs]
        report.decision = gate_challengers(client, settings, world, challengers, plan)
    return report


def train_vm_alone(
    client: MlflowClient, settings: Settings, world: World, spec: VMSpec, plan: TrainPlan
) -> tuple[dict[str, Trained], ChainDecision | None]:
    """One VM's variants on the champion FM and AE (the table's embedding version), its served variant gated
    against its own champion alone: how a VM is added, or retrained, without touching the others."""
    teacher = champion_teacher(client, plan.device)
    variants = train_vm_variants(client, settings, world, vm_data(world, teacher, plan.served_age_hours), spec, plan)
    if plan.serve_variant not in variants:
        return variants, None
    return variants, gate_challengers(client, settings, world, [served_challenger(spec, variants, teacher, plan)], plan)


def champion_examples(world: World, fm_version: str, ae_version: str, device: str, served_age_hours: int) -> VMData:
    """This world's evaluation hours as VM examples, features rebuilt with a registered FM and AE."""
    fm, ae = registry.load_fm(fm_version), registry.load_ae(ae_version)
    if not isinstance(fm, FoundationModel) or not isinstance(ae, Autoencoder):
        raise ValueError(f"{FM_MODEL} {fm_version} or {AE_MODEL} {ae_version} is not a SOLARIS model")
    teacher = Teacher(fm, ae, fm_version, ae_version, device)
    return build_vm_data(world.log, world.split.eval, world.index, teacher, served_age_hours)


def champion_ne(spec: VMSpec, pinned: PinnedVersions, examples: VMData) -> float:
    """The pinned VM's NE on ``examples`` built with its own FM and AE (:func:`champion_examples`)."""
    vm = registry.load_vm(pinned.vm_name, pinned.vm)
    if not isinstance(vm, VerticalModel):
        raise ValueError(f"{pinned.vm_model} version {pinned.vm} is not a SOLARIS vertical model")
    return vm_eval(vm, examples.for_vm(spec))["ne"]


def registered(client: MlflowClient, name: str, version: str | None) -> Trained:
    """A registered model as a :class:`Trained` (``version`` None: the ``challenger``)."""
    if version is None:
        found = registry.version_by_alias(client, name, CHALLENGER)
        if found is None:
            raise ValueError(f"{name} has no @{CHALLENGER}; train it first or pass its version")
        version = str(found.version)
    loaded = registry.load_fm(version) if name == FM_MODEL else registry.load_ae(version)
    return Trained(loaded, version, {})


def champion_teacher(client: MlflowClient, device: str) -> Teacher:
    """The champion AE and its FM: what the feature store's table is written with."""
    found = registry.version_by_alias(client, AE_MODEL, CHAMPION)
    if found is None:
        raise ValueError(f"{AE_MODEL} has no @{CHAMPION}: train the chain first (`solaris train all`)")
    return registered_teacher(client, str(found.version), device)


def registered_teacher(client: MlflowClient, ae_version: str | None, device: str) -> Teacher:
    """The AE (default: challenger) and the FM version its tags say it compresses."""
    ae = registered(client, AE_MODEL, ae_version)
    fm_version = client.get_model_version(AE_MODEL, ae.version).tags.get("fm_version")
    if not fm_version:
        raise ValueError(f"{AE_MODEL} version {ae.version} has no fm_version tag")
    return Teacher(registry.load_fm(fm_version), ae.model, fm_version, ae.version, device)
