UPDATE precompute_runs
SET figures = %(figures)s
WHERE run_id = %(run_id)s
