-- What a store made by an earlier release lacks (solaris/store/tables.py declares the tables).
-- Lists written before generations existed get one.
INSERT INTO item_list_generations (version_id, generation)
SELECT DISTINCT version_id, 1 FROM item_neighbours WHERE true
ON CONFLICT (version_id) DO NOTHING;
-- A store made before run records kept their quality figures gains the column.
ALTER TABLE precompute_runs ADD COLUMN IF NOT EXISTS figures TEXT NOT NULL DEFAULT '{}';
-- A store made before failed runs said why gains the column.
ALTER TABLE precompute_runs ADD COLUMN IF NOT EXISTS reason TEXT;
-- A store made before run records said which selector ran gains the columns.
ALTER TABLE precompute_runs ADD COLUMN IF NOT EXISTS selector TEXT;
ALTER TABLE precompute_runs ADD COLUMN IF NOT EXISTS selector_reason TEXT;
