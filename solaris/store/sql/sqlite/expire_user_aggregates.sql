-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM user_aggregates
WHERE rowid IN (SELECT rowid FROM user_aggregates WHERE expires_at <= :t LIMIT :batch_size)
