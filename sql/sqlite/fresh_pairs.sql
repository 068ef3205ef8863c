SELECT p.user_id, p.item_id
FROM json_each(:pairs) AS r
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version
  AND p.user_id = r.value ->> 0
  AND p.item_id = r.value ->> 1
  AND p.expires_at > :t
