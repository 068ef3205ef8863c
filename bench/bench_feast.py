"""The store's serving read against Feast's (#42 item 4): 1M pairs on SQLite, 1 user x 200 candidates of which
50 are the user's precomputed pairs, the rows and requests of bench_store.py.

SOLARIS reads all four tiers (``read_tiers``: pairs, aggregate, user neighbours, A2A) and decodes them; Feast
reads one feature view of the same pairs (``get_online_features``, its SQLite online store) and returns their
bytes, so Feast does the lesser part of the work. Feast runs in its own process and environment
(``feast_online.py``, ``.venv-feast`` from ``make bench-setup``); the two take turns a block of requests at a
time, each timed in its own process, so a busy stretch of the machine falls on both. The raw one-query SQLite
floor of bench_store.py is timed beside SOLARIS's read.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import tempfile
from collections.abc import Sequence
from pathlib import Path

import numpy as np
from bench_store import HOUR, ITEM_POOL, ITEMS_PER_USER, T0, Pairs, analyze, fill, paired_latencies_ms, sqlite_floor

from solaris.store import SqliteStoreConfig, open_store
from solaris.store.codec import to_micros

FEAST_PYTHON = Path(__file__).resolve().parents[1] / ".venv-feast" / "bin" / "python"
PRESENT, BLOCK = 50, 50


def mixed_requests(data: Pairs, n: int, seed: int = 3) -> tuple[np.ndarray, np.ndarray]:
    """Users and their 200 candidates: 50 of the user's own pairs, 150 pool items it has no pair for."""
    rng = np.random.default_rng(seed)
    users = rng.integers(0, len(data.users) // ITEMS_PER_USER, n)
    candidates = np.empty((n, ITEMS_PER_USER), dtype=np.int64)
    for row, user in enumerate(users):
        own = data.items[user * ITEMS_PER_USER : (user + 1) * ITEMS_PER_USER]
        others = np.setdiff1d(np.arange(ITEM_POOL), own)
        candidates[row] = rng.permutation(
            np.concatenate(
                [rng.choice(own, PRESENT, replace=False), rng.choice(others, ITEMS_PER_USER - PRESENT, replace=False)]
            )
        )
    return users, candidates


class Feast:
    """The Feast process: loads the pairs on start, then times blocks of requests on demand."""

    def __init__(self, workdir: Path, data: Pairs, users: np.ndarray, candidates: np.ndarray) -> None:
        np.savez(workdir / "pairs.npz", users=data.users, items=data.items, vectors=data.vectors.astype(np.float16))
        np.savez(workdir / "requests.npz", users=users, candidates=candidates)
        script = Path(__file__).with_name("feast_online.py")
        paths = [str(workdir), str(workdir / "pairs.npz"), str(workdir / "requests.npz")]
        self.process = subprocess.Popen(
            [str(FEAST_PYTHON), str(script), *paths, "--created-at", T0.isoformat()],
            stdin=subprocess.PIPE,
            stdout=subprocess.PIPE,
            text=True,
        )
        self.write_s = float(self._reply()["write_s"])

    def _reply(self) -> dict[str, list[float] | float]:
        line = self.process.stdout.readline()
        if not line:
            raise RuntimeError(f"the Feast process ended (exit {self.process.wait()}); its stderr says why")
        return json.loads(line)

    def time(self, start: int, stop: int) -> tuple[list[float], list[float]]:
        self.process.stdin.write(f"{start} {stop}\n")
        self.process.stdin.flush()
        reply = self._reply()
        return reply["ms"], reply["found"]

    def close(self) -> None:
        self.process.stdin.close()
        self.process.wait(timeout=60)


def compare(rows: int, n_requests: int, workdir: Path) -> dict[str, np.ndarray | float]:
    data = Pairs.make(rows)
    users, candidates = mixed_requests(data, n_requests)
    reqs = list(zip(users.tolist(), candidates, strict=True))
    path = workdir / "solaris.db"
    t = T0 + HOUR / 2
    with open_store(SqliteStoreConfig(path), init=True) as store:
        version, _ = fill(store, data)
        analyze("sqlite", str(path))
        feast = Feast(workdir, data, users, candidates)
        try:
            calls = [
                lambda u, items: store.read_tiers(version, u, items, t),
                sqlite_floor(str(path), version, to_micros(t, "t")),
            ]
            ours: list[list[float]] = [[], []]
            theirs, found = [], []
            for block, start in enumerate(range(0, n_requests, BLOCK)):
                stop = min(start + BLOCK, n_requests)
                feast_first = block % 2 == 1  # the two sides take turns at going first
                if feast_first:
                    feast_ms, feast_found = feast.time(start, stop)
                mine = paired_latencies_ms(calls, reqs[start:stop], warm=False)
                if not feast_first:
                    feast_ms, feast_found = feast.time(start, stop)
                for k, ms in enumerate(mine):
                    ours[k].extend(ms.tolist())
                theirs.extend(feast_ms)
                found.extend(feast_found)
            present = np.mean([store.read_tiers(version, u, items, t).pair_mask.sum() for u, items in reqs[:50]])
        finally:
            feast.close()
    return {
        # Each side's first block is its warm-up (caches, prepared statements), timed but not reported.
        "solaris": np.array(ours[0][BLOCK:]),
        "floor": np.array(ours[1][BLOCK:]),
        "feast": np.array(theirs[BLOCK:]),
        "feast_found": float(np.mean(found)),
        "solaris_found": float(present),
        "feast_write_s": feast.write_s,
    }


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--quick", action="store_true", help="100k pair rows, 300 requests")
    args = parser.parse_args(argv)
    if not FEAST_PYTHON.exists():
        print(f"skipped: no Feast environment at {FEAST_PYTHON.parent.parent}; `make bench-setup` makes it")
        return 0
    rows, n_requests = (100_000, 300) if args.quick else (1_000_000, 1_000)
    with tempfile.TemporaryDirectory() as tmp:
        r = compare(rows, n_requests, Path(tmp))
    print(
        f"{rows:,} pairs, SQLite, 1 user x 200 candidates ({r['solaris_found']:.0f} pairs found by SOLARIS,"
        f" {r['feast_found']:.0f} by Feast); Feast loaded them in {r['feast_write_s']:.0f} s"
    )
    print(f"{'read':<32} {'p50':>8} {'p99':>8} {'Feast/it p50':>13} {'Feast/it p99':>13}")
    feast50, feast99 = np.percentile(r["feast"], [50, 99])
    for name, ms in [
        ("SOLARIS read_tiers (4 tiers)", r["solaris"]),
        ("raw SQLite floor (pairs only)", r["floor"]),
        ("Feast get_online_features", r["feast"]),
    ]:
        p50, p99 = np.percentile(ms, [50, 99])
        print(f"{name:<32} {p50:>6.2f}ms {p99:>6.2f}ms {feast50 / p50:>12.1f}x {feast99 / p99:>12.1f}x")
    return 0


if __name__ == "__main__":
    sys.exit(main())
