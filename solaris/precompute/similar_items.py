"""Who the ad-to-ad (A2A) tier's item neighbour table covers, and with what.

The A2A tier serves, for (user, item), the similarity-weighted mean of the user's own fresh pair codes for
the items most similar to that item (``read_tiers.sql``). So:

- queries: every item of the catalogue (its ``items`` table): any of them may be a candidate, a new item
  included, and the catalogue is small next to the users (1,200 items on the default world, 20,000 on the
  large one);
- pool: the items with a pair code fresh during the hour (some user's, :func:`~solaris.precompute.expiry.fresh_codes`):
  only those can lend a code;
- vector: the FM's item vector (:func:`solaris.models.fm.item_vectors`), which an item without history
  has too.
"""

from __future__ import annotations

import numpy as np

from solaris.data.eventlog import EventLog


def catalogue(log: EventLog) -> np.ndarray:
    """Sorted ids of every item the log's catalogue lists."""
    return np.unique(log.items()["item_id"].to_numpy().astype(np.int64))
