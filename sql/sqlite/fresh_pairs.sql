-- Same access path as read_pairs.sql (one range scan per requested user), without the vectors.
WITH req AS (SELECT value ->> 0 AS user_id, value ->> 1 AS item_id FROM json_each(:pairs))
SELECT p.user_id, p.item_id
FROM (SELECT DISTINCT user_id FROM req) AS u
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = u.user_id AND p.expires_at > :t
  AND (p.user_id, +p.item_id) IN (SELECT user_id, item_id FROM req)
