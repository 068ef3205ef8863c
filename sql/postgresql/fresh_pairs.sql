-- Same access path as the pair tier of read_tiers.sql, without the vectors.
SELECT u.user_id, p.item_id
FROM unnest(%(users)s::bigint[]) AS u (user_id)
CROSS JOIN LATERAL (
    SELECT item_id FROM pair_embeddings
    WHERE version_id = %(version)s AND user_id = u.user_id AND expires_at > %(t)s
    OFFSET 0
) AS p
WHERE p.item_id IN (SELECT unnest(%(items)s::bigint[]))
