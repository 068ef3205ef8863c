"""Run every benchmark under bench/ in turn (``make bench``); pass --quick for the short versions."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    for script in sorted(Path(__file__).parent.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        sys.argv = [str(script)] + (["--quick"] if quick else [])
        runpy.run_path(str(script), run_name="__main__")
    return 0


if __name__ == "__main__":
    sys.exit(main())
