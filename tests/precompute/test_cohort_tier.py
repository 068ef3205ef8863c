"""The cohort tier end to end: the hourly run writes each recent cohort's new-user codes for the items most
shown, and a user with no history is served the FM's own code for it, on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import numpy as np

from solaris.config import Settings
from solaris.data.eventlog import EventLog
from solaris.enrichment.cohorts import log_cohorts, user_cohorts
from solaris.enrichment.tiers import COHORT, feeding_tier
from solaris.models.features import HistoryIndex
from solaris.precompute.cohort_codes import largest_cohorts, most_shown
from solaris.precompute.embedding import embed_codes, history_table
from solaris.precompute.knn_users import active_users
from solaris.precompute.run import run_hour
from solaris.serving import Ranker
from solaris.serving.champion import load_serving_model
from solaris.store import open_store
from solaris.store.codec import to_micros
from solaris.tracking import registry

COHORTS, ITEMS = 3, 12
PARAMS = {"shards": 1, "batch_size": 2048, "device": "cpu", "cohorts": COHORTS, "cohort_items": ITEMS}
HOUR = datetime(2026, 1, 5, tzinfo=UTC) + timedelta(hours=30)  # the tiny world's start + a day of history


def test_a_user_with_no_history_is_served_the_fms_code_for_a_new_user_of_its_cohort(run_settings: Settings) -> None:
    log = EventLog(run_settings.world_dir())
    done = run_hour(run_settings, HOUR, PARAMS, clock=lambda: HOUR)
    assert done["counts"]["cohort_codes_written"] == COHORTS * ITEMS
    registry.connect(run_settings)
    with open_store(run_settings.store_url) as store:
        record = store.get_run(done["run_key"])
        assert record is not None
        fm, ae = registry.load_fm(record.fm_version), registry.load_ae(record.ae_version)
        # Users with no request before the hour: no counters, no codes of their own.
        seen = set(log.requests(log.start, HOUR, columns=["user_id"])["user_id"].to_numpy().tolist())
        unseen = np.array([u for u in range(log.users().num_rows) if u not in seen], np.int64)
        recent = active_users(log, HOUR, 168)
        written = largest_cohorts(user_cohorts(fm.user, recent), recent, COHORTS)[0]
        items = most_shown(log, HOUR, 24, ITEMS)
        users, listed = np.repeat(unseen, len(items)), np.tile(items, len(unseen))
        cohorts = user_cohorts(fm.user, users)
        t = HOUR + timedelta(minutes=30)
        read = store.read_tiers_batch(record.embedding_version, users, listed, t, cohorts=cohorts)
        late = store.read_tiers_batch(
            record.embedding_version, users, listed, HOUR + timedelta(hours=1), cohorts=cohorts
        )
        # The ranker finds the same cohorts in its VM's user table, and reports the tier.
        model = load_serving_model(registry.connect(run_settings), run_settings.vms()[0].name, record.vm_version)
        ts, positions = np.full(len(users), to_micros(t, "t")), np.zeros(len(users), np.int64)
        served = Ranker(store, model).serve(users, listed, ts, positions, t)

    # The hourly figures key users from the log and the ranker from its VM: both find the FM's cohorts.
    np.testing.assert_array_equal(log_cohorts(log, users), cohorts)
    np.testing.assert_array_equal(model.cohorts(users), cohorts)
    fed = read.cohort_mask
    assert not read.pair_mask.any()
    # Exactly the rows of a written cohort and item are fed.
    np.testing.assert_array_equal(fed, np.isin(cohorts, written) & np.isin(listed, items))
    assert fed.any()
    assert not late.cohort_mask.any(), "a cohort code serves only the hour it was made for"
    np.testing.assert_array_equal(served.tiers, feeding_tier(read))  # a user with neighbours is fed by them first
    assert (served.tiers == COHORT).any()
    # The served value is the FM's own code for these users as new users, as of the hour (float16 storage).
    none = HistoryIndex.from_table(history_table(log, np.zeros(0, np.int64), HOUR, 1))
    own = embed_codes(fm, ae, none, users[fed], listed[fed], HOUR, device="cpu", new_users=True)
    np.testing.assert_allclose(read.pair[fed], own, rtol=2e-3, atol=2e-3)
