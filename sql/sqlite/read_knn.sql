-- For each requested user: its fresh neighbours with similarity > 0 and their fresh pairs for the
-- requested items (one range scan per neighbour, items as a filter). The store keeps the requested
-- (user, item) pairs and combines the neighbours by similarity weight.
SELECT n.user_id, p.item_id, n.similarity, p.vector
FROM json_each(:users) AS u
CROSS JOIN user_neighbours AS n
CROSS JOIN pair_embeddings AS p
WHERE n.version_id = :version AND n.user_id = u.value AND n.expires_at > :t AND n.similarity > 0
  AND p.version_id = :version AND p.user_id = n.neighbour_id AND p.expires_at > :t
  AND +p.item_id IN (SELECT value FROM json_each(:items))
