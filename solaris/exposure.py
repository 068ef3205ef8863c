"""The exposure-counter contract: how many impressions a user, and a (user, item) pair, had before a time.

Fatigue and habit live in these counts; the FM reads them, and so does every VM (a production ranker has
such counters whatever model it runs, so the transfer the replay measures is what only the FM brings). The
precompute writes them hourly into the store as of its hour's start; the ranker reads them in the same
statement as the tiers; training rebuilds them from the event log as of each impression's hour start, so
the values a VM learns on are the values it is served. This module alone names the windows and the
columns; it imports nothing, so the store, the models and the precompute can all use it.
"""

from __future__ import annotations

WINDOWS_H = (6, 24, 72)
WHO = ("user", "pair")


def columns() -> tuple[str, ...]:
    """The counter columns in the order every matrix holds them: the user's windows, then the pair's."""
    return tuple(f"n_{who}_{h}h" for who in WHO for h in WINDOWS_H)


# How long the store serves an hour's counters: one missed or late hourly run leaves them an hour stale, not
# gone (a VM reads absent counters as a user never shown anything).
TTL_HOURS = 2
