-- Whether SQLite holds no statistics for a table (run only once sqlite_stat1 exists: see stats_table.sql).
SELECT NOT EXISTS (SELECT 1 FROM sqlite_stat1 WHERE tbl = :table)
