-- Per table: all rows of the version, those fresh at :t (point in time, as read_tiers.sql: created_at <= :t
-- < expires_at), the oldest and newest created_at of any row, and the fresh rows expiring by :horizon.
-- exposure_counts belongs to no version: every version's stats count all of its rows.
SELECT 'pair_embeddings' AS tbl, count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0),
       min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM pair_embeddings WHERE version_id = :version
UNION ALL
SELECT 'user_aggregates', count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0),
       min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM user_aggregates WHERE version_id = :version
UNION ALL
SELECT 'user_neighbours', count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0),
       min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM user_neighbours WHERE version_id = :version
UNION ALL
SELECT 'item_neighbours', count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0),
       min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM item_neighbours WHERE version_id = :version
UNION ALL
SELECT 'exposure_counts', count(*), coalesce(sum(created_at <= :t AND expires_at > :t), 0),
       min(created_at), max(created_at),
       coalesce(sum(created_at <= :t AND expires_at > :t AND expires_at <= :horizon), 0)
FROM exposure_counts
