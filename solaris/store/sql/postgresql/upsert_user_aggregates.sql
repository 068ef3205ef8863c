-- In user order: two concurrent writers of overlapping users then lock their rows in one order (no deadlock).
INSERT INTO user_aggregates (version_id, user_id, vector, pair_count, window_hours, created_at, expires_at, run_id)
SELECT %(version)s, user_id, vector, pair_count, %(window_hours)s, %(created_at)s, %(expires_at)s, %(run_id)s
FROM aggregate_staging
ORDER BY user_id
ON CONFLICT (version_id, user_id) DO UPDATE SET
    vector = excluded.vector,
    pair_count = excluded.pair_count,
    window_hours = excluded.window_hours,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at,
    run_id = excluded.run_id
