-- Set once on each serving-read connection (only those), so that read_tiers.sql and fresh_pairs.sql keep
-- one plan whatever the statistics say. Measured on 1M pairs: the planner's own choice flips once the
-- partitions are analyzed (autovacuum does so within minutes of a write) to a nested loop that probes
-- the pair index once per requested item, or one that rescans each neighbour's pairs per item: 10-50x
-- slower (12-90 ms). Hash joins over one bitmap scan per partition are right at every size here.
--   plan_cache_mode: one generic plan per connection, no planning per request (~0.3-0.6 ms saved);
--     the partitions are still pruned by expires_at at executor start.
--   enable_nestloop / enable_mergejoin off: hash joins only.
--   enable_indexscan off: a bitmap heap scan visits each heap page once, where a plain index scan pins
--     the page again for every row (a user's pairs lie on a few pages; ~25% faster).
--   enable_seqscan off: the generic plan read the item lists (one row per item, 4,000 in bench_store) by a
--     sequential scan filtered by the requested ids, 1.1 ms, where their key finds the 200 rows at once.
--   (JIT is off on every store connection: a disabled join method adds a huge nominal cost, which would
--   otherwise trigger JIT compilation.)
--   application_name: tells these sessions apart in pg_stat_activity.
SET application_name = 'solaris-store-reader';
SET plan_cache_mode = force_generic_plan;
SET enable_nestloop = off;
SET enable_mergejoin = off;
SET enable_indexscan = off;
SET enable_seqscan = off;
