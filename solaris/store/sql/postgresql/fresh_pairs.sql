-- The pair access path of read_tiers.sql without the vectors: one bitmap scan per live partition over the
-- requested users, the items kept by a hash of the requested ones (run on a reader connection, whose
-- session settings pin that plan). Point in time, as read_tiers.sql: created_at <= t < expires_at.
SELECT user_id, item_id
FROM pair_embeddings
WHERE version_id = %(version)s AND expires_at > %(t)s AND created_at <= %(t)s
  AND user_id = ANY(%(users)s::bigint[])
  AND item_id IN (SELECT unnest(%(items)s::bigint[]))
