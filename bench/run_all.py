"""Run every benchmark under bench/ in turn (``make bench``); pass --quick for the short versions.

Each script ends in ``sys.exit(main())``: its exit is caught here so that the next one runs, and any that
failed fail the whole run, named, at the end."""

from __future__ import annotations

import runpy
import sys
from pathlib import Path


def run_script(script: Path, quick: bool) -> int:
    sys.argv = [str(script)] + (["--quick"] if quick else [])
    try:
        runpy.run_path(str(script), run_name="__main__")
    except SystemExit as done:
        return done.code if isinstance(done.code, int) else (0 if done.code is None else 1)
    return 0


def main() -> int:
    quick = "--quick" in sys.argv[1:]
    failed = []
    for script in sorted(Path(__file__).parent.glob("bench_*.py")):
        print(f"\n=== {script.name} ===", flush=True)
        if run_script(script, quick):
            failed.append(script.name)
    if failed:
        print(f"\nfailed: {', '.join(failed)}", file=sys.stderr)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
