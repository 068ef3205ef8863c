"""Who the hourly user KNN covers: its queries (who gets a neighbour row) and its pool (who can be a neighbour).

The neighbour tier serves, for (user, item), the neighbours' fresh pair codes for the same item, so it can
only add coverage for a user with no code of its own if that user has a row and its neighbours have codes.
Measured on the tiny replay before this design (issue #16): 2.6% of served rows had neither a pair code nor
an aggregate; 80% of them came from users who had signed up but never requested before the hour, only 17%
from users with a request in the week before it (the rest signed up during the hour: no run can know them).

- queries: the *active* users, with a request or a sign-up in the last ``knn_lookback_hours``;
- pool: the users with a pair code fresh during the hour (:func:`~solaris.precompute.expiry.fresh_codes`), the only ones whose codes the tier can serve;
- vector: the FM's user vector (:func:`solaris.models.fm.user_vectors`), which a user without history has
  too. Against the FM's own code of those rows, the neighbours' mean code scored cosine 0.36 with it, 0.28
  with the user's mean FM item vector over a week of impressions, 0.24 with side features alone, 0.21 with
  random neighbours and 0.23 with the item's mean code over all users.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import numpy as np
import pyarrow as pa
import pyarrow.compute as pc

from solaris.data.eventlog import EventLog

SIGNUP_COLUMN = "signup_ts"


def active_users(log: EventLog, before: datetime, hours: int) -> np.ndarray:
    """Sorted ids of the users with a request or a sign-up in ``[before - hours, before)``."""
    start = before - timedelta(hours=hours)
    requested = log.requests(start, before, columns=["user_id"])["user_id"].to_numpy()
    return np.union1d(requested.astype(np.int64), signed_up(log, start, before))


def signed_up(log: EventLog, start: datetime, end: datetime) -> np.ndarray:
    """Ids of the users who signed up in ``[start, end)``: none where the users table has no ``signup_ts``
    (an imported log), since then a sign-up is only seen at its first request."""
    users = log.users()
    if SIGNUP_COLUMN not in users.column_names:
        return np.empty(0, np.int64)
    signup = users[SIGNUP_COLUMN]
    kind = signup.type
    inside = pc.and_(pc.greater_equal(signup, pa.scalar(start, type=kind)), pc.less(signup, pa.scalar(end, type=kind)))
    return users["user_id"].filter(inside).to_numpy().astype(np.int64)
