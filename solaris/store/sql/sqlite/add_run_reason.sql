-- A store made before failed runs said why gains the column (init_schema checks first).
ALTER TABLE precompute_runs ADD COLUMN reason TEXT
