-- For each requested (user, item): the user's fresh neighbours with similarity > 0 that hold a fresh
-- pair for the item; the store combines them by similarity weight.
SELECT r.value ->> 0 AS user_id, r.value ->> 1 AS item_id, n.similarity, p.vector
FROM json_each(:pairs) AS r
CROSS JOIN user_neighbours AS n
CROSS JOIN pair_embeddings AS p
WHERE n.version_id = :version
  AND n.user_id = r.value ->> 0
  AND n.expires_at > :t
  AND n.similarity > 0
  AND p.version_id = :version
  AND p.user_id = n.neighbour_id
  AND p.item_id = r.value ->> 1
  AND p.expires_at > :t
