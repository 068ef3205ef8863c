-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM exposure_counts
WHERE ctid IN (SELECT ctid FROM exposure_counts WHERE expires_at <= %(t)s LIMIT %(batch_size)s)
