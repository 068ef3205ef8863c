UPDATE precompute_runs
SET status = %(status)s, counts = %(counts)s, timings = %(timings)s, finished_at = %(finished_at)s,
    reason = %(reason)s
WHERE run_id = %(run_id)s
