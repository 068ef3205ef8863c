"""Ablation (not a headline figure): how far a selector's hit rate while fresh is from what its candidate pool
allows. For each hour a replay arm wrote pair codes, over the pairs fresh in ``[w, w + ttl)``:

- ``hit``: the arm's hit rate while fresh (the report's ``hit_rate_ttl``);
- ``user returns`` and ``hit | returns``: the share of written pairs whose user requests in the window, and the
  hit rate among those, whose product is ``hit``;
- ``return oracle``: the hit rate had the same FM calls gone to the pool pairs of users who do return, best
  selector score first (a selector that knew who comes back, and only that);
- ``ceiling``: the pool's requested pairs over the pairs written, the hit rate of a selector that knew every
  request: no selector that spends its budget on this pool can exceed it (the run records' ``hit_ceiling_ttl``,
  :func:`solaris.precompute.quality.hit_ceiling`, here over every hour the arm wrote).

An hour whose pairs were written without a scored pool (a shadow run writes the challenger's codes for the
champion's selection and scores nothing) has no oracle and no ceiling: it is left out of every figure, and
counted, so that all of them are over the same hours.

    .venv/bin/python ablations/hit_ceiling.py var/replay/default/seed-2/state/budget-58279
"""

from __future__ import annotations

import argparse
import sys
from datetime import datetime, timedelta
from pathlib import Path

import numpy as np

from solaris.data.eventlog import EventLog
from solaris.embedding_version import parse_embedding_version
from solaris.precompute.codelog import CodeLog
from solaris.precompute.params import PrecomputeParams
from solaris.precompute.quality import hit_ceiling, requested_mask, requested_pairs

HOUR = timedelta(hours=1)
COUNTS = ("written", "hits", "returning", "returning_hits", "oracle_hits", "pool_requested")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("arm", type=Path, help="a replay arm's state folder (<replay out>/seed-N/state/<arm>)")
    parser.add_argument("--ttl-hours", type=int, default=PrecomputeParams.ttl_hours)
    parser.add_argument("--version", help="the embedding version to read, where the arm wrote several (an FM refresh)")
    args = parser.parse_args(argv)
    var = args.arm / "var"
    log = EventLog(var / "worlds" / "replay")
    written = sorted(p.name for p in (var / "precompute" / "codes").iterdir())
    version = args.version or (written[0] if len(written) == 1 else None)
    if version not in written:
        parser.error(f"--version: {args.arm} wrote {', '.join(written)}; name one of them")
    codes = CodeLog(var / "precompute" / "codes", version, parse_embedding_version(version).dim)
    total, poolless = dict.fromkeys(COUNTS, 0), 0
    for hour in log.hours():
        if hour + args.ttl_hours * HOUR > log.end:
            break
        counts = hour_counts(log, codes, hour, args.ttl_hours)
        if counts is None:
            poolless += 1
            continue
        for name, n in counts.items():
            total[name] += n
    if not total["written"]:
        print(f"{args.arm}: no pair codes written", file=sys.stderr)
        return 1
    written, returning = total["written"], max(total["returning"], 1)
    print(
        f"ABLATION {args.arm.name} ({version}, TTL {args.ttl_hours} h, {written:,} pairs written): "
        f"hit {total['hits'] / written:.3f} = user returns {total['returning'] / written:.3f} x hit | returns "
        f"{total['returning_hits'] / returning:.3f}; return oracle {total['oracle_hits'] / written:.3f}; "
        f"ceiling {hit_ceiling(total['pool_requested'], written):.3f}"
        + (f"; {poolless} hours written without a scored pool left out" if poolless else "")
    )
    return 0


def hour_counts(log: EventLog, codes: CodeLog, hour: datetime, ttl_hours: int) -> dict[str, int] | None:
    """The hour's counts; None where it wrote pairs but scored no pool."""
    written, pool = codes.read(hour, hour + HOUR), codes.score_log.read(hour, hour + HOUR)
    if not len(written.user_ids):
        return dict.fromkeys(COUNTS, 0)
    if not len(pool.user_ids):
        return None
    users, items = requested_pairs(log, hour, hour + ttl_hours * HOUR)
    hit = requested_mask(written.user_ids, written.item_ids, users, items)
    returns = np.isin(written.user_ids, users)
    requested = requested_mask(pool.user_ids, pool.item_ids, users, items)
    returning = np.flatnonzero(np.isin(pool.user_ids, users))
    bought = returning[np.argsort(-pool.scores[returning], kind="stable")[: len(hit)]]
    return {
        "written": len(hit),
        "hits": int(hit.sum()),
        "returning": int(returns.sum()),
        "returning_hits": int(hit[returns].sum()),
        "oracle_hits": int(requested[bought].sum()),
        "pool_requested": int(requested.sum()),
    }


if __name__ == "__main__":
    sys.exit(main())
