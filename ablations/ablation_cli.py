"""The command line the ablations over one event log share: the log's folder first, then the training seeds."""

from __future__ import annotations

import argparse
from pathlib import Path


def log_parser(doc: str | None, seeds: bool = False) -> argparse.ArgumentParser:
    """``doc`` (the ablation's module docstring, its how-to) as the help; ``--seeds`` where it trains."""
    parser = argparse.ArgumentParser(description=doc, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world", type=Path, help="an event log folder (var/worlds/<name>)")
    if seeds:
        parser.add_argument("--seeds", type=int, nargs="+", default=[0])
    return parser
