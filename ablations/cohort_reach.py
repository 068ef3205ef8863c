"""Ablation (not a headline figure): the most the new-user cohort tier can feed for a `cohorts` x `cohort_items`
grid, from the event log alone: the share of the replay's evaluation impressions whose user had no impression
in the 72 h before the hour (no exposure counters: the rows the store gives a cohort code), whose side-feature
cohort is among the C largest of the recent users and whose item is among the K most shown in the day before,
as the hourly cohort step picks them (:mod:`solaris.precompute.cohort_codes`).

    .venv/bin/python ablations/cohort_reach.py var/worlds/ml100k --grid 32x200 128x1000
"""

from __future__ import annotations

import argparse
import sys
from datetime import timedelta
from pathlib import Path

import numpy as np

from solaris.data.eventlog import EventLog
from solaris.data.schema import USER_FEATURE_PREFIX
from solaris.enrichment.cohorts import cohort_keys
from solaris.eval.spans import ReplaySpans
from solaris.exposure import WINDOWS_H
from solaris.models.features import IdTable
from solaris.precompute.cohort_codes import largest_cohorts, most_shown
from solaris.precompute.knn_users import active_users
from solaris.precompute.params import PrecomputeParams

HOUR = timedelta(hours=1)


def grid(text: str) -> tuple[int, int]:
    cohorts, items = text.split("x")
    return int(cohorts), int(items)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("world", type=Path, help="an event log folder (var/worlds/<name>)")
    parser.add_argument("--grid", type=grid, nargs="+", default=[(32, 200), (128, 1000)], help="CxK, e.g. 32x200")
    args = parser.parse_args(argv)
    log, p = EventLog(args.world), PrecomputeParams()
    users = IdTable.from_table(log.users(), "user_id", USER_FEATURE_PREFIX)
    span = ReplaySpans.of(log).eval
    shown_total, counterless, reached = 0, 0, dict.fromkeys(args.grid, 0)
    hour = span.start
    while hour < span.end:
        shown = log.impressions(hour, hour + HOUR, ["user_id", "item_id"])
        user, item = shown["user_id"].to_numpy(), shown["item_id"].to_numpy()
        counted = log.impressions(hour - max(WINDOWS_H) * HOUR, hour, ["user_id"])["user_id"].to_numpy()
        new = ~np.isin(user, counted)
        recent = active_users(log, hour, p.knn_lookback_hours)
        recent_keys, keys = (cohort_keys(users.features[users.rows(ids)]) for ids in (recent, user))
        for c, k in args.grid:
            top = largest_cohorts(recent_keys, recent, c)[0]
            reached[(c, k)] += int((new & np.isin(keys, top) & np.isin(item, most_shown(log, hour, p.window_hours, k))).sum())
        shown_total, counterless = shown_total + len(user), counterless + int(new.sum())
        hour += HOUR
    print(f"ABLATION {args.world.name}: evaluation span {span.start:%Y-%m-%d %H}:00 to {span.end:%Y-%m-%d %H}:00, "
          f"{shown_total:,} impressions, {counterless / shown_total:.1%} of users without counters")
    for (c, k), n in reached.items():
        print(f"  {c:>4} cohorts x {k:>5} items = {c * k:>7,} FM calls an hour: at most {n / shown_total:.1%} fed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
