INSERT INTO precompute_runs (run_id, interval_start, interval_end, fm_version, ae_version, vm_version,
                             embedding_version, status, counts, timings, started_at, finished_at, figures,
                             selector, selector_reason)
VALUES (%(run_id)s, %(interval_start)s, %(interval_end)s, %(fm_version)s, %(ae_version)s, %(vm_version)s,
        %(embedding_version)s, 'running', '{}', '{}', %(started_at)s, NULL, '{}',
        %(selector)s, %(selector_reason)s)
ON CONFLICT (run_id) DO UPDATE SET
    interval_start = excluded.interval_start,
    interval_end = excluded.interval_end,
    fm_version = excluded.fm_version,
    ae_version = excluded.ae_version,
    vm_version = excluded.vm_version,
    embedding_version = excluded.embedding_version,
    status = 'running',
    counts = '{}',
    timings = '{}',
    started_at = excluded.started_at,
    finished_at = NULL,
    reason = NULL,
    selector = excluded.selector,
    selector_reason = excluded.selector_reason
