-- The access path of read_tiers.sql for the requested users' own pairs, without the vectors; point in time
-- as it is (created_at <= :t < expires_at).
SELECT p.user_id, p.item_id
FROM json_each(:users) AS u
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = u.value AND p.created_at <= :t AND p.expires_at > :t
  AND +p.item_id IN (SELECT value FROM json_each(:items))
