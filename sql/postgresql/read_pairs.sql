SELECT p.user_id, p.item_id, p.vector
FROM unnest(%(users)s::bigint[], %(items)s::bigint[]) AS r (user_id, item_id)
JOIN pair_embeddings AS p
  ON p.version_id = %(version)s AND p.user_id = r.user_id AND p.item_id = r.item_id AND p.expires_at > %(t)s
