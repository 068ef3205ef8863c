"""``solaris train fm|ae|vm|demand|all``: train, log to MLflow, register; ``all`` also runs the promotion
gate, then trains the demand model."""

from __future__ import annotations

import argparse
import json
from datetime import datetime

from solaris.precompute.params import cli_option
from solaris.training_knobs import EPOCHS
from solaris.vms import registered_name


def add_parser(sub: argparse._SubParsersAction) -> None:
    train = sub.add_parser("train", help="train the FM, the AE, a VM, or the whole chain")
    tsub = train.add_subparsers(dest="train_command", required=True, metavar="MODEL")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("--name", help="world name under $SOLARIS_DATA_DIR/worlds (default: SOLARIS_WORLD)")
    common.add_argument("--seed", type=int, default=0)
    common.add_argument(
        "--epochs", type=int, help=f"most epochs per model (default {EPOCHS}; early stopping ends most sooner)"
    )
    common.add_argument("--threads", type=int, help="torch threads (1 is best on a busy 2-core machine)")
    common.add_argument("--no-progress", action="store_true")

    tsub.add_parser("fm", parents=[common], help="train and register solaris-fm").set_defaults(handler=fm)
    ae = tsub.add_parser("ae", parents=[common], help="train and register solaris-ae")
    ae.add_argument("--fm-version", help="FM version to compress (default: solaris-fm@challenger)")
    ae.set_defaults(handler=ae_)
    vm = tsub.add_parser("vm", parents=[common], help="train one VM on the champion FM and AE, gated on its own")
    vm.add_argument("--vm", help="a configured VM's name (vms.toml; default: the first configured)")
    vm.add_argument("--variant", help="only this variant: base|distilled|solaris|solaris_distilled (default: all)")
    vm.add_argument("--ae-version", help="train on this AE and its FM instead, registered as challenger, not gated")
    vm.set_defaults(handler=vm_)
    demand = tsub.add_parser("demand", parents=[common], help="train solaris-demand (the budget selector's model)")
    demand.add_argument("--until", help="ISO-8601 time: train on the hours before it (default: the log's end)")
    flag, options = cli_option("ttl_hours")
    demand.add_argument(flag, **options)
    demand.set_defaults(handler=demand_)
    tsub.add_parser(
        "all", parents=[common], help="FM, AE, every configured VM, promotion gate, demand model"
    ).set_defaults(handler=all_)


def _plan(args: argparse.Namespace, device: str):  # noqa: ANN202 - heavy types imported lazily
    from solaris.models.training import FitConfig
    from solaris.training.jobs import TrainPlan

    epochs = {} if args.epochs is None else {"epochs": args.epochs}
    fit = FitConfig(**epochs, seed=args.seed, threads=args.threads, progress=not args.no_progress)
    return TrainPlan(fit=fit, device=device)


def _context(args: argparse.Namespace):  # noqa: ANN202
    from solaris.config import get_settings
    from solaris.tracking import registry
    from solaris.training.jobs import World

    settings = get_settings()
    plan = _plan(args, settings.device)
    world = World.open(settings.world_dir(args.name), plan.fractions)
    return settings, registry.connect(settings), plan, world


def _print(what: str, version: str, found: dict[str, float]) -> None:
    print(json.dumps({"model": what, "version": version, **{k: round(float(v), 6) for k, v in found.items()}}))


def fm(args: argparse.Namespace) -> int:
    from solaris.training.jobs import train_fm_job

    settings, client, plan, world = _context(args)
    trained = train_fm_job(client, settings, world, plan)
    _print("solaris-fm", trained.version, trained.metrics)
    return 0


def ae_(args: argparse.Namespace) -> int:
    from solaris.training.jobs import FM_MODEL, registered, train_ae_job

    settings, client, plan, world = _context(args)
    trained = train_ae_job(client, settings, world, registered(client, FM_MODEL, args.fm_version), plan)
    _print("solaris-ae", trained.version, trained.metrics)
    return 0


def demand_(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.eventlog import EventLog
    from solaris.training import steps

    settings = get_settings()
    settings = settings.with_overrides(world=args.name) if args.name else settings
    until = datetime.fromisoformat(args.until) if args.until else EventLog(settings.world_dir()).end
    if until.tzinfo is None:
        raise ValueError(f"--until {args.until!r} needs a UTC offset (e.g. 2026-01-09T12:00+00:00)")
    print(json.dumps(steps.train_demand(settings, until, args.ttl_hours, args.seed)))
    return 0


def vm_(args: argparse.Namespace) -> int:
    from dataclasses import replace

    from solaris.models.vm import VARIANTS
    from solaris.training.jobs import registered_teacher, train_vm_alone, train_vm_variants, vm_data
    from solaris.vms import choose

    if args.variant is not None and args.variant not in VARIANTS:
        raise ValueError(f"--variant {args.variant!r}: choose one of {', '.join(VARIANTS)}")
    settings, client, plan, world = _context(args)
    specs = settings.vms()
    (spec,) = choose(specs, [args.vm]) if args.vm else specs[:1]
    plan = plan if args.variant is None else replace(plan, variants=(args.variant,))
    decision = None
    if args.ae_version is None:
        variants, decision = train_vm_alone(client, settings, world, spec, plan)
    else:
        data = vm_data(world, registered_teacher(client, args.ae_version, plan.device), plan.served_age_hours)
        variants = train_vm_variants(client, settings, world, data, spec, plan)
    for variant, trained in variants.items():
        _print(f"{spec.registered_name} ({variant})", trained.version, trained.metrics)
    if decision is not None:
        print(json.dumps({"promoted": decision.promoted, "reason": decision.reason}))
    return 0


def all_(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.training.jobs import train_all

    settings = get_settings()
    report = train_all(settings, settings.world_dir(args.name), _plan(args, settings.device))
    _print("solaris-fm", report.fm.version, report.fm.metrics)
    _print("solaris-ae", report.ae.version, report.ae.metrics)
    for name, variants in report.vms.items():
        for variant, trained in variants.items():
            _print(f"{registered_name(name)} ({variant})", trained.version, trained.metrics)
    if report.decision is not None:
        print(json.dumps({"promoted": report.decision.promoted, "reason": report.decision.reason}))
    from solaris.data.eventlog import EventLog
    from solaris.precompute.params import PrecomputeParams
    from solaris.training import steps

    world = settings.with_overrides(world=args.name) if args.name else settings
    until = EventLog(world.world_dir()).end
    print(json.dumps(steps.train_demand(world, until, PrecomputeParams.ttl_hours, args.seed)))
    return 0
