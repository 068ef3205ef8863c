SELECT run_id FROM precompute_runs WHERE status = 'running' ORDER BY run_id
