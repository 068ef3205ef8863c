-- The old row of a key may sit in another expiry-hour partition: remove it before inserting the new one.
-- Old rows are found by one range scan per staged user and partition (cost grows with the batch, not the
-- table), then deleted by full primary key.
WITH old AS (
    SELECT e.user_id, e.item_id, e.expires_at
    FROM (SELECT DISTINCT user_id FROM pair_staging) AS u
    CROSS JOIN LATERAL (
        SELECT user_id, item_id, expires_at FROM pair_embeddings
        WHERE version_id = %(version)s AND user_id = u.user_id
        OFFSET 0
    ) AS e
    WHERE (e.user_id, e.item_id) IN (SELECT user_id, item_id FROM pair_staging)
)
DELETE FROM pair_embeddings AS p
USING old
WHERE p.version_id = %(version)s AND p.user_id = old.user_id AND p.item_id = old.item_id
  AND p.expires_at = old.expires_at
