-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM item_neighbours
WHERE ctid IN (SELECT ctid FROM item_neighbours WHERE expires_at <= %(t)s LIMIT %(batch_size)s)
