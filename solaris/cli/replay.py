"""``solaris replay``: the paper's table on an event log (a generated preset, a world, or any log folder)."""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from solaris.eval.protocol import (
    DEFAULT_FM_REFRESH,
    FM_REFRESH_HOURS,
    PLAN_MIN_DEMAND,
    PLAN_TTL_HOURS,
    REPLAY_KNOBS,
    SWEEP_WARMUP_HOURS,
    VM_SEEDS,
)
from solaris.precompute.params import cli_option


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("replay", help="replay an event log hour by hour and report what SOLARIS transfers")
    source = p.add_mutually_exclusive_group()
    source.add_argument(
        "--preset", help="generate this synthetic world per seed (tiny|default|churn|plain|large; default tiny)"
    )
    source.add_argument("--world", help="a world already under SOLARIS_DATA_DIR/worlds (e.g. imported MovieLens)")
    source.add_argument("--log", type=Path, help="an event log folder")
    p.add_argument("--seeds", type=int, nargs="+", default=[0], help="one replay per seed (world and training)")
    p.add_argument(
        "--vm-seeds",
        type=int,
        nargs="+",
        default=list(VM_SEEDS),
        help=f"train every VM variant once per seed and report the mean and spread (default {' '.join(map(str, VM_SEEDS))})",
    )
    for name in REPLAY_KNOBS:
        flag, options = cli_option(name)
        p.add_argument(flag, **options)
    p.add_argument(
        "--fm-refresh",
        choices=list(FM_REFRESH_HOURS),
        default=DEFAULT_FM_REFRESH,
        help="how often the FM is refreshed while the log replays: daily (production's cadence) or none (an "
        "ablation: the FM frozen after the training span)",
    )
    p.add_argument("--out", type=Path, help="report folder (default: SOLARIS_DATA_DIR/replay/<world>)")
    p.add_argument("--no-sweep", action="store_true", help="skip the top_fraction sweep (faster)")
    p.add_argument("--no-speculation", action="store_true", help="skip the selector comparison (faster)")
    p.add_argument(
        "--sweep-warmup-hours",
        type=int,
        default=SWEEP_WARMUP_HOURS,
        help=f"hours each sweep or selector arm precomputes first (default {SWEEP_WARMUP_HOURS})",
    )
    p.add_argument("--sweep-hours", type=int, help="eval hours each sweep or selector arm serves (default: all)")
    p.add_argument(
        "--no-plan",
        action="store_true",
        help="skip the capacity plan: its grid arms (the budget selector at every spend x --plan-ttl-hours, and "
        "--plan-min-demand) and plan/",
    )
    p.add_argument(
        "--plan-ttl-hours",
        type=int,
        nargs="*",
        default=list(PLAN_TTL_HOURS),
        help=f"the TTLs the plan's grid runs besides --ttl-hours (default {' '.join(map(str, PLAN_TTL_HOURS))})",
    )
    p.add_argument(
        "--plan-min-demand",
        type=float,
        nargs="*",
        default=list(PLAN_MIN_DEMAND),
        help="the min_demand floors the plan's grid runs at its largest spend "
        f"(default {' '.join(map(str, PLAN_MIN_DEMAND))})",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.eval.job import ReplayRequest, replay_one, summary, violated
    from solaris.eval.plan_job import plan_folders
    from solaris.eval.report.plan_view import plan_text

    settings = get_settings()
    request = ReplayRequest(
        preset=args.preset or (None if args.world or args.log else "tiny"),
        world=args.world,
        log=args.log,
        seeds=tuple(args.seeds),
        knobs={name: getattr(args, name) for name in REPLAY_KNOBS},
        out=args.out,
        sweep=not args.no_sweep,
        speculation=not args.no_speculation,
        sweep_warmup_hours=args.sweep_warmup_hours,
        sweep_hours=args.sweep_hours,
        fm_refresh=args.fm_refresh,
        vm_seeds=tuple(args.vm_seeds),
        plan=not args.no_plan,
        plan_ttl_hours=tuple(args.plan_ttl_hours),
        plan_min_demand=tuple(args.plan_min_demand),
    )
    folders = [replay_one(settings, request, seed) for seed in request.seeds]
    print(summary(folders))
    if request.plans:  # its own intervals decide it, whatever invariant a seed broke (MovieLens's undefined ratio)
        plan, out = plan_folders(settings, folders)
        print(f"{plan_text(plan)}plan: {out}")
    if broken := violated(folders):
        print(f"solaris replay: invariants violated in {', '.join(broken)}", file=sys.stderr)
        return 1
    return 0
