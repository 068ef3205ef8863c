-- Whether PostgreSQL has never analyzed a table: reltuples stays -1 until its first VACUUM or ANALYZE.
SELECT reltuples < 0 FROM pg_class WHERE oid = %(table)s::regclass
