SELECT run_id, interval_start, interval_end, fm_version, ae_version, vm_version, embedding_version,
       status, counts, timings, started_at, finished_at, figures, reason, selector, selector_reason
FROM precompute_runs
ORDER BY interval_start DESC, started_at DESC, run_id DESC
LIMIT %(n)s
