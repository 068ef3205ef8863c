-- :pairs is a JSON array of [user_id, item_id]; CROSS JOIN keeps it the outer loop (one PK probe per pair).
SELECT p.user_id, p.item_id, p.vector
FROM json_each(:pairs) AS r
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version
  AND p.user_id = r.value ->> 0
  AND p.item_id = r.value ->> 1
  AND p.expires_at > :t
