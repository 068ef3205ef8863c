-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM exposure_counts
WHERE rowid IN (SELECT rowid FROM exposure_counts WHERE expires_at <= :t LIMIT :batch_size)
