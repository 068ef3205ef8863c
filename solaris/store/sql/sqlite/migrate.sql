-- What a store made by an earlier release lacks (solaris/store/tables.py declares the tables; the run
-- records' figures, reason and selector columns are added by SqliteStore.init_schema, as SQLite has no ADD COLUMN IF NOT EXISTS).
-- Lists written before generations existed get one.
INSERT INTO item_list_generations (version_id, generation)
SELECT DISTINCT version_id, 1 FROM item_neighbours WHERE true
ON CONFLICT (version_id) DO NOTHING;
