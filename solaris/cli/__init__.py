"""The ``solaris`` command. Each domain adds its own subcommands; heavy imports happen inside handlers."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from solaris.cli import data, main_job, plan, replay, serve, stack, store, train

DOMAINS = (data, main_job, plan, replay, serve, stack, store, train)


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="solaris", description=__doc__)
    sub = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    for domain in DOMAINS:
        domain.add_parser(sub)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = build_parser().parse_args(argv)
    try:
        return int(args.handler(args) or 0)
    except (ValueError, FileNotFoundError, FileExistsError) as exc:
        print(f"solaris: error: {exc}", file=sys.stderr)
        return 2


if __name__ == "__main__":
    sys.exit(main())
