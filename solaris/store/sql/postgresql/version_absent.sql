-- Formatted with one pair partition's name ({table}): whether it holds no row of the version yet (one index probe).
SELECT NOT EXISTS (SELECT 1 FROM {table} WHERE version_id = %(version)s)
