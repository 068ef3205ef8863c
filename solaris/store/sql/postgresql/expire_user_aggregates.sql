-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM user_aggregates
WHERE ctid IN (SELECT ctid FROM user_aggregates WHERE expires_at <= %(t)s LIMIT %(batch_size)s)
