UPDATE precompute_runs
SET status = :status, counts = :counts, timings = :timings, finished_at = :finished_at,
    reason = :reason
WHERE run_id = :run_id
