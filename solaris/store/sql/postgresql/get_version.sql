SELECT version_id, fm_version, ae_version, dim, dtype, created_at
FROM embedding_versions
WHERE version_id = %(version_id)s
