-- %(users)s and %(items)s are the distinct requested ids. Each user's rows are read by one range scan of
-- the primary key per live partition and kept if their item was requested (a hashed set); the store keeps
-- the requested (user, item) pairs of this users x items answer. OFFSET 0 fences the LATERAL subquery, so
-- the plan holds even before the partitions, created on demand, have statistics.
SELECT u.user_id, p.item_id, p.vector
FROM unnest(%(users)s::bigint[]) AS u (user_id)
CROSS JOIN LATERAL (
    SELECT item_id, vector FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE p.item_id IN (SELECT unnest(%(items)s::bigint[]))
