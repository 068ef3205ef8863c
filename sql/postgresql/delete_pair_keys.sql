-- The old row of a key may sit in another expiry-hour partition: remove it before inserting the new one.
DELETE FROM pair_embeddings AS p
USING pair_staging AS s
WHERE p.version_id = %(version)s AND p.user_id = s.user_id AND p.item_id = s.item_id
