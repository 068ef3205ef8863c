"""``solaris main``: the README's main job on the embedded default (grows with each part of the loop)."""

from __future__ import annotations

import argparse
import json


def add_parser(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("main", help="generate the default world and run the loop on the embedded setup")
    p.add_argument("--preset", default="default", help="world preset (tiny|default|large)")
    p.add_argument("--seed", type=int, default=0)
    p.set_defaults(handler=run)


def run(args: argparse.Namespace) -> int:
    from solaris.config import get_settings
    from solaris.data.synthetic import PRESETS, generate_world

    settings = get_settings()
    log = generate_world(
        PRESETS[args.preset].with_seed(args.seed), settings.world_dir(), overwrite=True, progress=True
    )
    print(json.dumps(log.summary(), indent=2))
    return 0
