-- Per table: all rows of the version, those fresh at t (point in time, as read_tiers.sql: created_at <= t
-- < expires_at), the oldest and newest created_at of any row, and the fresh rows expiring by the horizon.
-- exposure_counts belongs to no version: every version's stats count all of its rows.
SELECT 'pair_embeddings' AS tbl, count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s),
       min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM pair_embeddings WHERE version_id = %(version)s
UNION ALL
SELECT 'user_aggregates', count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s),
       min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM user_aggregates WHERE version_id = %(version)s
UNION ALL
SELECT 'user_neighbours', count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s),
       min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM user_neighbours WHERE version_id = %(version)s
UNION ALL
SELECT 'item_neighbours', count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s),
       min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM item_neighbours WHERE version_id = %(version)s
UNION ALL
SELECT 'exposure_counts', count(*), count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s),
       min(created_at), max(created_at),
       count(*) FILTER (WHERE created_at <= %(t)s AND expires_at > %(t)s AND expires_at <= %(horizon)s)
FROM exposure_counts
