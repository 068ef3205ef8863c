INSERT INTO pair_embeddings (version_id, user_id, item_id, vector, score, created_at, expires_at, run_id)
SELECT %(version)s, user_id, item_id, vector, score, %(created_at)s, %(expires_at)s, %(run_id)s
FROM pair_staging
