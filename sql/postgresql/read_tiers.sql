-- Every tier of a request in one statement (one round trip, one snapshot), rows tagged by tier:
--   0 pair:       user_id, item_id, vector
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
-- %(users)s and %(items)s are the distinct requested ids; the store keeps the requested (user, item) pairs
-- of the users x items answer. Pairs are read by one range scan of the primary key per user (and per
-- neighbour) and live partition, items kept by a hashed set. OFFSET 0 fences the LATERAL subqueries, so the
-- plan holds even before the partitions, created on demand, have statistics.
SELECT 0 AS tier, u.user_id, p.item_id, 0::real AS similarity, p.vector
FROM unnest(%(users)s::bigint[]) AS u (user_id)
CROSS JOIN LATERAL (
    SELECT item_id, vector FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE p.item_id IN (SELECT unnest(%(items)s::bigint[]))
UNION ALL
SELECT 1, user_id, -1, 0, vector
FROM user_aggregates
WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[]) AND expires_at > %(t)s
UNION ALL
SELECT 2, u.user_id, p.item_id, n.similarity, p.vector
FROM unnest(%(users)s::bigint[]) AS u (user_id)
CROSS JOIN LATERAL (
    SELECT neighbour_id, similarity FROM user_neighbours
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s AND similarity > 0
    OFFSET 0
) AS n
CROSS JOIN LATERAL (
    SELECT item_id, vector FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = n.neighbour_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE p.item_id IN (SELECT unnest(%(items)s::bigint[]))
