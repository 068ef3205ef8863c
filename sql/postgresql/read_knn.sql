-- For each requested (user, item): the user's fresh neighbours with similarity > 0 that hold a fresh
-- pair for the item; the store combines them by similarity weight.
SELECT r.user_id, r.item_id, n.similarity, p.vector
FROM unnest(%(users)s::bigint[], %(items)s::bigint[]) AS r (user_id, item_id)
JOIN user_neighbours AS n
  ON n.version_id = %(version)s AND n.user_id = r.user_id AND n.expires_at > %(t)s AND n.similarity > 0
JOIN pair_embeddings AS p
  ON p.version_id = %(version)s AND p.user_id = n.neighbour_id AND p.item_id = r.item_id
 AND p.expires_at > %(t)s
