"""What mapping raw ids to dense ids costs: at import, against the import itself, and at serving, per request.

Import: the same log as a CSV twice, once with text ids ("u-93581", sparse "ad-…") and once with dense integer
ids, each imported whole; the mapping (canonical text, then dense numbering) is also timed alone on the text
log's parsed columns, and reported as a share of that import. Targets: the mapping <= 5% of the import.

Serving: one user and 200 candidates per request, parsed from JSON as the service gets them, raw -> dense
through maps of 10k, 100k and 1M users and items (a dict lookup each), against turning the same 200 ids into
an array as a world without a map does. Target: <= 50 us. The dict is bound by memory: a lookup in a map
larger than the caches costs a few cache misses, so the figure grows with the map.
"""

from __future__ import annotations

import argparse
import json
import statistics
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Sequence
from pathlib import Path

import numpy as np
import pandas as pd
import pyarrow as pa

from solaris.data.idmap import IdMap
from solaris.data.importer import ColumnMapping, DuplicateRowsWarning, import_file
from solaris.data.sources import parse_raw_ids, parse_timestamps, read_source

MAPPING = ColumnMapping(user="user", item="item", timestamp="ts", label="click")
START = 1_704_067_200  # 2024-01-01, unix seconds
CANDIDATES = 200


def write_logs(folder: Path, rows: int, users: int, items: int, seed: int = 0) -> tuple[Path, Path]:
    """The same events with text ids and with dense integer ids, as two CSV files."""
    rng = np.random.default_rng(seed)
    user = rng.integers(0, users, rows)
    item = rng.integers(0, items, rows)
    ts = START + np.sort(rng.integers(0, 7 * 24 * 3600, rows))
    click = (rng.random(rows) < 0.05).astype(np.int8)
    sparse_item = item * 44 + 7  # sparse, as a team's ids are
    paths = folder / "text.csv", folder / "dense.csv"
    text = pd.DataFrame(
        {"user": "u-" + pd.Series(user).astype(str), "item": "ad-" + pd.Series(sparse_item).astype(str)}
    )
    dense = pd.DataFrame({"user": user, "item": item})
    for frame, path in zip((text, dense), paths, strict=True):
        frame.assign(ts=ts, click=click).to_csv(path, index=False)
    return paths


def import_seconds(source: Path, target: Path) -> float:
    """The fastest of two imports: on a busy machine the slower one mostly measures the others' work."""
    seconds = []
    for _ in range(2):
        started = time.perf_counter()
        import_file(source, target, MAPPING, overwrite=True)
        seconds.append(time.perf_counter() - started)
    return min(seconds)


def mapping_seconds(source: Path) -> float:
    """The import's id work alone, on the parsed source: canonical text, then dense numbering, both columns."""
    parsed = read_source(source, MAPPING.columns())
    ts = parse_timestamps(parsed, MAPPING.timestamp)
    started = time.perf_counter()
    for column in (MAPPING.user, MAPPING.item):
        IdMap.assign(parse_raw_ids(parsed, column), ts)
    return time.perf_counter() - started


def measure_import(rows: int, users: int, items: int) -> dict[str, float]:
    with tempfile.TemporaryDirectory() as tmp:
        folder = Path(tmp)
        text, dense = write_logs(folder, rows, users, items)
        return {
            "import_text": import_seconds(text, folder / "text-log"),
            "import_dense": import_seconds(dense, folder / "dense-log"),
            "mapping": min(mapping_seconds(text) for _ in range(3)),  # the fastest of three, as above
        }


def per_request_us(call: Callable[[object], object], requests: list) -> float:
    """The median over ``requests``, each timed alone and used once, in microseconds: on a busy machine a
    request timed alone is rarely descheduled, where a batch of them would be."""
    times = []
    for request in requests:
        started = time.perf_counter()
        call(request)
        times.append(time.perf_counter() - started)
    return statistics.median(times) * 1e6


def fresh_requests(spell_user: Callable, spell_item: Callable, map_size: int, count: int) -> list:
    """``count`` bodies as the service gets them: parsed from JSON, so every id is a new object (its hash not
    yet computed), the candidates random over the map."""
    rng = np.random.default_rng(1)
    bodies = [
        json.dumps(
            [spell_user(int(rng.integers(map_size))), [spell_item(int(k)) for k in rng.choice(map_size, CANDIDATES)]]
        )
        for _ in range(count)
    ]
    return [json.loads(body) for body in bodies]


SPELLINGS = {  # as in the tests: text, and integers around 2**62 (items negative)
    "text": (lambda u: f"u-{u}", lambda i: f"ad-{i * 44 + 7}"),
    "2**62": (lambda u: 2**62 + u, lambda i: -(2**62) - i * 44),
}


def measure_serving(map_size: int, count: int) -> dict[str, dict[str, float]]:
    """Per spelling: raw -> dense through maps of ``map_size`` ids, and the baseline of a world without a map."""
    found = {}
    for name, (spell_user, spell_item) in SPELLINGS.items():
        users = IdMap(pa.array([str(spell_user(k)) for k in range(map_size)]))
        items = IdMap(pa.array([str(spell_item(k)) for k in range(map_size)]))
        users.dense_ids([""]), items.dense_ids([""])  # the dicts are built once, at start

        def mapped(request: list) -> None:
            users.dense_ids([request[0]]), items.dense_ids(request[1])

        def unmapped(request: list) -> None:
            int(request[0]), np.asarray(request[1], np.int64)

        raw = fresh_requests(spell_user, spell_item, map_size, count)
        dense = fresh_requests(int, int, map_size, count)
        found[name] = {"mapped_us": per_request_us(mapped, raw), "baseline_us": per_request_us(unmapped, dense)}
    return found


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__)
    parser.add_argument("--quick", action="store_true", help="200k rows, maps up to 100k, instead of 1M and 1M")
    args = parser.parse_args(argv)
    rows, map_sizes = (200_000, (10_000, 100_000)) if args.quick else (1_000_000, (10_000, 100_000, 1_000_000))

    warnings.simplefilter("ignore", DuplicateRowsWarning)  # random events repeat a few (user, item, hour)
    r = measure_import(rows, users=rows // 20, items=rows // 200)
    print(
        f"{'rows':>10} {'import text-ids s':>18} {'import dense-ids s':>19} {'text/dense':>11} "
        f"{'mapping s':>10} {'mapping/import':>15}"
    )
    print(
        f"{rows:>10,} {r['import_text']:>18.2f} {r['import_dense']:>19.2f} {r['import_text'] / r['import_dense']:>10.2f}x "
        f"{r['mapping']:>10.3f} {r['mapping'] / r['import_text']:>14.1%}",
        flush=True,
    )
    print(
        f"\n{'ids':>10} {'map size':>10} {'raw->dense us/request':>22} {'no map us/request':>18} {'ratio':>7}"
        f"  (1 user x {CANDIDATES} candidates)"
    )
    for map_size in map_sizes:
        for name, s in measure_serving(map_size, count=3000).items():
            ratio = s["mapped_us"] / s["baseline_us"]
            print(
                f"{name:>10} {map_size:>10,} {s['mapped_us']:>22.1f} {s['baseline_us']:>18.1f} {ratio:>6.1f}x",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
