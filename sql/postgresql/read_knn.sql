-- For each requested user: its fresh neighbours with similarity > 0 and their fresh pairs for the
-- requested items (one range scan per neighbour and partition, items as a hashed set). The store keeps
-- the requested (user, item) pairs and combines the neighbours by similarity weight. OFFSET 0 fences pin
-- the plan before the on-demand partitions have statistics.
SELECT u.user_id, p.item_id, n.similarity, p.vector
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
