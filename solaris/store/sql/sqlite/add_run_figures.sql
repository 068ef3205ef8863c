-- A store made before run records kept their quality figures gains the column (init_schema checks first).
ALTER TABLE precompute_runs ADD COLUMN figures TEXT NOT NULL DEFAULT '{}'
