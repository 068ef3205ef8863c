-- Formatted with a neighbour table ({table}) and its key column ({owner_id}).
INSERT INTO {table} (version_id, {owner_id}, neighbour_id, similarity, created_at, expires_at, run_id)
SELECT %(version)s, owner_id, neighbour_id, similarity, %(created_at)s, %(expires_at)s, %(run_id)s
FROM neighbour_staging
