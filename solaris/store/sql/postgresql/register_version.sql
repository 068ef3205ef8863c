INSERT INTO embedding_versions (version_id, fm_version, ae_version, dim, dtype, created_at)
VALUES (%(version_id)s, %(fm_version)s, %(ae_version)s, %(dim)s, %(dtype)s, %(created_at)s)
ON CONFLICT (version_id) DO NOTHING
