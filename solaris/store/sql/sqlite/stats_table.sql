-- Whether any ANALYZE has run on this database: sqlite_stat1 exists only from the first one on.
SELECT count(*) FROM sqlite_schema WHERE name = 'sqlite_stat1'
