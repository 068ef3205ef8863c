SELECT 'pair_embeddings' AS tbl, count(*), coalesce(sum(expires_at > :t), 0), min(created_at), max(created_at),
       coalesce(sum(expires_at > :t AND expires_at <= :horizon), 0)
FROM pair_embeddings WHERE version_id = :version
UNION ALL
SELECT 'user_aggregates', count(*), coalesce(sum(expires_at > :t), 0), min(created_at), max(created_at),
       coalesce(sum(expires_at > :t AND expires_at <= :horizon), 0)
FROM user_aggregates WHERE version_id = :version
UNION ALL
SELECT 'user_neighbours', count(*), coalesce(sum(expires_at > :t), 0), min(created_at), max(created_at),
       coalesce(sum(expires_at > :t AND expires_at <= :horizon), 0)
FROM user_neighbours WHERE version_id = :version
