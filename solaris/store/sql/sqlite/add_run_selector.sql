-- A store made before run records said which selector ran gains the column (init_schema checks first).
ALTER TABLE precompute_runs ADD COLUMN selector TEXT
