UPDATE precompute_runs
SET figures = :figures
WHERE run_id = :run_id
