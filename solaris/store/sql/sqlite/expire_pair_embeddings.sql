-- One bounded batch; the caller commits between batches so no lock is held for long.
DELETE FROM pair_embeddings
WHERE rowid IN (SELECT rowid FROM pair_embeddings WHERE expires_at <= :t LIMIT :batch_size)
