-- Every tier of a request in one statement (one snapshot, one prepared statement), rows tagged by tier:
--   0 pair:       user_id, item_id, vector
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
-- :users and :items are JSON arrays of the distinct requested ids; the store keeps the requested (user,
-- item) pairs of the users x items answer. Pairs are found by one range scan of the primary key per user
-- (and per neighbour) with the item test as a filter (+item_id): a scan reads only the slim key index and
-- fetches the rows it keeps, which beats a probe per (neighbour, item), and the scan stays bounded by what
-- the precompute wrote per user.
SELECT 0 AS tier, p.user_id, p.item_id, 0.0 AS similarity, p.vector
FROM json_each(:users) AS u
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = u.value AND p.expires_at > :t
  AND +p.item_id IN (SELECT value FROM json_each(:items))
UNION ALL
SELECT 1, a.user_id, -1, 0.0, a.vector
FROM json_each(:users) AS u
CROSS JOIN user_aggregates AS a
WHERE a.version_id = :version AND a.user_id = u.value AND a.expires_at > :t
UNION ALL
SELECT 2, n.user_id, p.item_id, n.similarity, p.vector
FROM json_each(:users) AS u
CROSS JOIN user_neighbours AS n
CROSS JOIN pair_embeddings AS p
WHERE n.version_id = :version AND n.user_id = u.value AND n.expires_at > :t AND n.similarity > 0
  AND p.version_id = :version AND p.user_id = n.neighbour_id AND p.expires_at > :t
  AND +p.item_id IN (SELECT value FROM json_each(:items))
