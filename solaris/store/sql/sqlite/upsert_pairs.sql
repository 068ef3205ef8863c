INSERT INTO pair_embeddings (version_id, user_id, item_id, vector, score, created_at, expires_at, run_id)
VALUES (?, ?, ?, ?, ?, ?, ?, ?)
ON CONFLICT (version_id, user_id, item_id) DO UPDATE SET
    vector = excluded.vector,
    score = excluded.score,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at,
    run_id = excluded.run_id
