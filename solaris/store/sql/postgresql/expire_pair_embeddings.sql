-- One bounded batch of the rows left in partitions that are only partly expired.
DELETE FROM pair_embeddings AS p
USING (SELECT version_id, user_id, item_id, expires_at FROM pair_embeddings
       WHERE expires_at <= %(t)s LIMIT %(batch_size)s) AS d
WHERE p.version_id = d.version_id AND p.user_id = d.user_id AND p.item_id = d.item_id
  AND p.expires_at = d.expires_at
