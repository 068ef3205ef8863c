-- For each requested (user, item): the user's fresh neighbours with similarity > 0 that hold a fresh pair
-- for the item (the store combines them by similarity weight). Each neighbour's rows are read by one range
-- scan and kept if requested, instead of one probe per (neighbour, candidate).
WITH req AS (SELECT value ->> 0 AS user_id, value ->> 1 AS item_id FROM json_each(:pairs))
SELECT n.user_id, p.item_id, n.similarity, p.vector
FROM (SELECT DISTINCT user_id FROM req) AS u
CROSS JOIN user_neighbours AS n
CROSS JOIN pair_embeddings AS p
WHERE n.version_id = :version AND n.user_id = u.user_id AND n.expires_at > :t AND n.similarity > 0
  AND p.version_id = :version AND p.user_id = n.neighbour_id AND p.expires_at > :t
  AND (n.user_id, +p.item_id) IN (SELECT user_id, item_id FROM req)
