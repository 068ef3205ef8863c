-- Formatted with a neighbour table ({table}) and its key column ({owner_id}).
INSERT INTO {table} (version_id, {owner_id}, neighbour_id, similarity, created_at, expires_at, run_id)
VALUES (?, ?, ?, ?, ?, ?, ?)
