"""Synthetic world generation throughput, against the IO floor measured in the same run.

The floor is the time to write the very same hourly tables to Parquet through the same writer, without
simulating anything: ``generate / floor`` says how much the simulation costs on top of the unavoidable IO.
"""

from __future__ import annotations

import argparse
import sys
import tempfile
import time
from collections.abc import Sequence
from pathlib import Path

import pyarrow.parquet as pq

from solaris.data import hourly
from solaris.data.eventlog import EventLog
from solaris.data.synthetic import PRESETS, generate_world


def io_floor_seconds(log: EventLog, copy_dir: Path) -> float:
    """Rewrite every hourly file of ``log`` with the generator's writer; time only the writes."""
    total = 0.0
    for dataset in ("requests", "impressions"):
        for path in sorted((log.root / dataset).rglob("*.parquet")):
            table = pq.read_table(path)
            started = time.perf_counter()
            hourly.write_hourly(table, copy_dir / dataset, path.stem)
            total += time.perf_counter() - started
    return total


def measure(preset: str, workdir: Path) -> dict[str, float]:
    started = time.perf_counter()
    log = generate_world(PRESETS[preset], workdir / preset)
    seconds = time.perf_counter() - started
    floor = io_floor_seconds(log, workdir / f"{preset}-copy")
    impressions = log.meta["counts"]["impressions"]
    return {"impressions": impressions, "seconds": seconds, "floor": floor, "rate": impressions / seconds}


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="default preset only")
    args = parser.parse_args(argv)
    presets = ["default"] if args.quick else ["default", "large"]
    print(
        f"{'preset':<8} {'impressions':>12} {'generate s':>11} {'impr/s':>10} {'impr/min':>10} "
        f"{'parquet-only s':>15} {'generate/parquet':>17}"
    )
    for preset in presets:
        with tempfile.TemporaryDirectory() as tmp:
            r = measure(preset, Path(tmp))
        print(
            f"{preset:<8} {r['impressions']:>12,} {r['seconds']:>11.2f} {r['rate']:>10,.0f} "
            f"{r['rate'] * 60:>10,.0f} {r['floor']:>15.2f} {r['seconds'] / r['floor']:>16.1f}x",
            flush=True,
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
