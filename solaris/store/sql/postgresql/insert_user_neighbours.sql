INSERT INTO user_neighbours (version_id, user_id, neighbour_id, similarity, created_at, expires_at, run_id)
SELECT %(version)s, user_id, neighbour_id, similarity, %(created_at)s, %(expires_at)s, %(run_id)s
FROM neighbour_staging
