"""Ablation (not a headline figure): the most the new-user cohort tier can feed for a `cohorts` x `cohort_items`
grid, from the event log alone: the share of the replay's evaluation impressions whose user had no impression
in the 72 h before the hour (no exposure counters: the rows the store gives a cohort code), whose side-feature
cohort is among the C largest of the recent users and whose item is among the K most shown in the day before,
as the hourly cohort step picks them (:func:`solaris.eval.ceiling.cohort_reach`; `solaris data profile` reports
it at the default grid).

    .venv/bin/python ablations/cohort_reach.py var/worlds/ml100k --grid 32x200 128x1000
"""

from __future__ import annotations

import sys

from ablation_cli import log_parser

from solaris.data.eventlog import EventLog
from solaris.eval.ceiling import cohort_reach
from solaris.eval.spans import ReplaySpans
from solaris.precompute.params import PrecomputeParams


def grid(text: str) -> tuple[int, int]:
    cohorts, items = text.split("x")
    return int(cohorts), int(items)


def main(argv: list[str] | None = None) -> int:
    parser = log_parser(__doc__)
    parser.add_argument("--grid", type=grid, nargs="+", default=[(32, 200), (128, 1000)], help="CxK, e.g. 32x200")
    args = parser.parse_args(argv)
    log = EventLog(args.world)
    span = ReplaySpans.of(log).eval
    reach = cohort_reach(log, span, args.grid, PrecomputeParams())
    print(
        f"ABLATION {args.world.name}: evaluation span {span.start:%Y-%m-%d %H}:00 to {span.end:%Y-%m-%d %H}:00, "
        f"{reach.impressions:,} impressions, {reach.counterless / reach.impressions:.1%} of users without counters"
    )
    for c, k in args.grid:
        print(f"  {c:>4} cohorts x {k:>5} items = {c * k:>7,} FM calls an hour: at most {reach.share((c, k)):.1%} fed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
