INSERT INTO user_aggregates (version_id, user_id, vector, pair_count, window_hours, created_at, expires_at, run_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (version_id, user_id) DO UPDATE SET
    vector = excluded.vector,
    pair_count = excluded.pair_count,
    window_hours = excluded.window_hours,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at,
    run_id = excluded.run_id
