-- A user's counters are one row, replaced whole by the next write of the user (an upsert: no lock needed;
-- the writer sends the users in id order, so concurrent writers of overlapping users cannot deadlock).
INSERT INTO exposure_counts (user_id, counts, item_count, created_at, expires_at, run_id)
VALUES (%s, %s, %s, %s, %s, %s)
ON CONFLICT (user_id) DO UPDATE SET
    counts = excluded.counts,
    item_count = excluded.item_count,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at,
    run_id = excluded.run_id
