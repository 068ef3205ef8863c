-- An item's list is one row, replaced whole by the next write of the item.
INSERT INTO item_neighbours (version_id, item_id, neighbours, created_at, expires_at, run_id)
VALUES (?, ?, ?, ?, ?, ?)
ON CONFLICT (version_id, item_id) DO UPDATE SET
    neighbours = excluded.neighbours,
    created_at = excluded.created_at,
    expires_at = excluded.expires_at,
    run_id = excluded.run_id
