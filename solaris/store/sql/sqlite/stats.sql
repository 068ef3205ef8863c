-- Per table: all rows of the version, those fresh at :t (point in time, as read_tiers.sql: created_at <= :t
-- < expires_at), the oldest and newest created_at of any row, and the fresh rows expiring by :horizon.
-- exposure_counts belongs to no version: every version's stats count all of its rows. A table with no rows
-- has no group: the store reports it empty.
WITH stamped (tbl, created_at, expires_at) AS (
    SELECT 'pair_embeddings', created_at, expires_at FROM pair_embeddings WHERE version_id = :version
    UNION ALL SELECT 'user_aggregates', created_at, expires_at FROM user_aggregates WHERE version_id = :version
    UNION ALL SELECT 'user_neighbours', created_at, expires_at FROM user_neighbours WHERE version_id = :version
    UNION ALL SELECT 'item_neighbours', created_at, expires_at FROM item_neighbours WHERE version_id = :version
    UNION ALL SELECT 'exposure_counts', created_at, expires_at FROM exposure_counts
)
SELECT tbl, count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0), min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM stamped
GROUP BY tbl
