SELECT a.user_id, a.vector
FROM json_each(:users) AS r
CROSS JOIN user_aggregates AS a
WHERE a.version_id = :version
  AND a.user_id = r.value
  AND a.expires_at > :t
