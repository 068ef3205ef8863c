-- Same access path as read_pairs.sql (one range scan per requested user and partition), without the vectors.
WITH req AS MATERIALIZED (SELECT * FROM unnest(%(users)s::bigint[], %(items)s::bigint[]) AS r (user_id, item_id))
SELECT u.user_id, p.item_id
FROM (SELECT DISTINCT user_id FROM req) AS u
CROSS JOIN LATERAL (
    SELECT item_id FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE (u.user_id, p.item_id) IN (SELECT user_id, item_id FROM req)
