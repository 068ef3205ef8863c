"""``solaris data generate|import|summary``."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    data = sub.add_parser("data", help="generate, import or inspect event logs")
    dsub = data.add_subparsers(dest="data_command", required=True, metavar="ACTION")

    gen = dsub.add_parser("generate", help="generate a synthetic ads world")
    gen.add_argument("--preset", default="default", help="tiny|default|large")
    gen.add_argument("--seed", type=int, default=0)
    gen.add_argument("--name", help="world name under $SOLARIS_DATA_DIR/worlds (default: SOLARIS_WORLD)")
    gen.add_argument("--overwrite", action="store_true")
    gen.set_defaults(handler=generate)

    summ = dsub.add_parser("summary", help="print an event log's summary")
    summ.add_argument("--name", help="world name (default: SOLARIS_WORLD)")
    summ.set_defaults(handler=summary)


def generate(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.synthetic import PRESETS, generate_world

    if args.preset not in PRESETS:
        raise ValueError(f"--preset {args.preset!r}: choose one of {', '.join(PRESETS)}")
    settings = get_settings()
    log = generate_world(
        PRESETS[args.preset].with_seed(args.seed),
        settings.world_dir(args.name),
        overwrite=args.overwrite,
        progress=True,
    )
    print(json.dumps(log.summary(), indent=2))
    return 0


def summary(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.eventlog import EventLog

    print(json.dumps(EventLog(get_settings().world_dir(args.name)).summary(), indent=2))
    return 0
