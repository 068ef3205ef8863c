-- Per table: all rows of the version, those fresh at t (point in time, as read_tiers.sql: created_at <= t
-- < expires_at), the oldest and newest created_at of any row, and the fresh rows expiring by the horizon.
-- exposure_counts belongs to no version: every version's stats count all of its rows. A table with no rows
-- has no group: the store reports it empty.
WITH stamped (tbl, created_at, expires_at) AS (
    SELECT 'pair_embeddings', created_at, expires_at FROM pair_embeddings WHERE version_id = %(version)s
    UNION ALL SELECT 'user_aggregates', created_at, expires_at FROM user_aggregates WHERE version_id = %(version)s
    UNION ALL SELECT 'user_neighbours', created_at, expires_at FROM user_neighbours WHERE version_id = %(version)s
    UNION ALL SELECT 'item_neighbours', created_at, expires_at FROM item_neighbours WHERE version_id = %(version)s
    UNION ALL SELECT 'exposure_counts', created_at, expires_at FROM exposure_counts
)
SELECT tbl, count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s), min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM stamped
GROUP BY tbl
