"""``solaris plan <replay folder>``: the FM budget and TTL to run at, from the arms a replay ran."""

from __future__ import annotations

import argparse
from pathlib import Path

from solaris.eval.plan import PLAN_TARGET


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("plan", help="how much NE the FM calls of an hour buy, and the budget and TTL to run at")
    p.add_argument(
        "replay", type=Path, help="the folder solaris replay wrote (its --out; the seed-<N> folders' parent)"
    )
    p.add_argument(
        "--target",
        type=float,
        default=PLAN_TARGET,
        help=f"the NE loss against its selector's full budget the knee may cost (default {PLAN_TARGET:g})",
    )
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.eval.plan_job import plan_folders, report_folders
    from solaris.eval.report.plan_view import plan_text

    plan, out = plan_folders(get_settings(), report_folders(args.replay), args.target)
    print(f"{plan_text(plan)}plan: {out}")
    return 0
