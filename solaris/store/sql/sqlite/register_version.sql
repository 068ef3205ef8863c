INSERT INTO embedding_versions (version_id, fm_version, ae_version, dim, dtype, created_at)
VALUES (:version_id, :fm_version, :ae_version, :dim, :dtype, :created_at)
ON CONFLICT (version_id) DO NOTHING
