INSERT INTO user_neighbours (version_id, user_id, neighbour_id, similarity, created_at, expires_at, run_id)
VALUES (?, ?, ?, ?, ?, ?, ?)
