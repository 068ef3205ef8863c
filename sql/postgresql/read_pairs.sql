-- Each requested user's rows are read by one range scan of the primary key in each live partition (a user
-- holds a few hundred pairs), then kept if requested: far fewer index descents than one per pair and
-- partition. OFFSET 0 fences the LATERAL subquery so the plan holds even before the partitions, created
-- on demand, have statistics.
WITH req AS MATERIALIZED (SELECT * FROM unnest(%(users)s::bigint[], %(items)s::bigint[]) AS r (user_id, item_id))
SELECT u.user_id, p.item_id, p.vector
FROM (SELECT DISTINCT user_id FROM req) AS u
CROSS JOIN LATERAL (
    SELECT item_id, vector FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE (u.user_id, p.item_id) IN (SELECT user_id, item_id FROM req)
