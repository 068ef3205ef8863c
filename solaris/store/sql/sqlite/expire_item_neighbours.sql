-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM item_neighbours
WHERE rowid IN (SELECT rowid FROM item_neighbours WHERE expires_at <= :t LIMIT :batch_size)
