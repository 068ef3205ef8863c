-- For each requested (user, item): the user's fresh neighbours with similarity > 0 that hold a fresh pair
-- for the item (the store combines them by similarity weight). Each neighbour's rows are read by one range
-- scan per partition and kept if requested; OFFSET 0 fences pin that plan before partitions have statistics.
WITH req AS MATERIALIZED (SELECT * FROM unnest(%(users)s::bigint[], %(items)s::bigint[]) AS r (user_id, item_id))
SELECT u.user_id, p.item_id, n.similarity, p.vector
FROM (SELECT DISTINCT user_id FROM req) AS u
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
WHERE (u.user_id, p.item_id) IN (SELECT user_id, item_id FROM req)
