-- :users and :items are JSON arrays of the distinct requested ids. Each user's rows are read by one range
-- scan of the primary key (+item_id keeps the item test a filter, not a probe per item) and the store
-- keeps the requested (user, item) pairs of this users x items answer. A user holds a bounded number of
-- pairs (what the precompute wrote), so the scan is bounded too.
SELECT p.user_id, p.item_id, p.vector
FROM json_each(:users) AS u
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = u.value AND p.expires_at > :t
  AND +p.item_id IN (SELECT value FROM json_each(:items))
