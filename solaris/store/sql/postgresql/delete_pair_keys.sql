-- The old row of a key may sit in another expiry-hour partition: remove it before inserting the new one.
-- Old rows are found by one index range scan per staged user and partition, its staged items as an index
-- condition (cost grows with the batch, not the table), then deleted by full primary key. Both steps are
-- MATERIALIZED and the items go in as one array per user: a partition's statistics may predate the version
-- being written (each partition is analyzed at its first write; a shadow version comes second), and with the
-- staged keys as a semi-join the planner re-hashed the whole batch once per user (50k keys: 12-16 s, or
-- minutes when folded into the DELETE; measured).
WITH staged AS MATERIALIZED (
    SELECT user_id, array_agg(item_id) AS item_ids FROM pair_staging GROUP BY user_id
), old AS MATERIALIZED (
    SELECT e.user_id, e.item_id, e.expires_at
    FROM staged AS s
    CROSS JOIN LATERAL (
        SELECT user_id, item_id, expires_at FROM pair_embeddings
        WHERE version_id = %(version)s AND user_id = s.user_id AND item_id = ANY (s.item_ids)
    ) AS e
)
DELETE FROM pair_embeddings AS p
USING old
WHERE p.version_id = %(version)s AND p.user_id = old.user_id AND p.item_id = old.item_id
  AND p.expires_at = old.expires_at
