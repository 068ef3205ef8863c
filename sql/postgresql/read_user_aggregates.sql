SELECT user_id, vector
FROM user_aggregates
WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[]) AND expires_at > %(t)s
