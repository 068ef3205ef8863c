-- Every tier of a request in one statement (one snapshot, one prepared statement), rows tagged by tier:
--   0 pair:       user_id, item_id, vector: every fresh pair of a requested user, requested or not (the
--                 A2A tier needs the user's codes for the items like the requested ones)
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
--   3 item list:  item_id, its slot count (as similarity), its packed list of similar items (user_id -1)
--   4 exposure:   user_id, its item count (as similarity), its packed counters (item_id -1; any version)
-- :users and :items are JSON arrays of the distinct requested ids; the store keeps the requested (user,
-- item) pairs of the users x items answer and matches the A2A tier's lists to the user's pairs in numpy.
-- `sources` lists whose pairs each requested user needs (itself for tier 0, its neighbours for tier 2);
-- each source's pairs are found by one range scan of the primary key (for a neighbour with the item test
-- as a filter: +item_id, against one set of the requested items): a scan reads only the slim key index and
-- fetches the rows it keeps, which beats a probe per (source, item), and it stays bounded by what the
-- precompute wrote per user. An item list is one row per requested item, found by its key: one row per
-- item, not one per (item, similar item). Measured with bench_store (1M pair rows, 20 similar items): the
-- join done here over one row per entry made the read 2-3x slower at p50 than without the tier; packed
-- lists matched in numpy, 1.5-2x.
-- Point in time: every table is read with created_at <= :t < expires_at, so a read for an earlier hour never
-- sees a row written for a later one (a filter on the rows fetched anyway; no index). Each table keeps one
-- row per key (an upsert replaces the older row), so a read before the newer row's created_at finds nothing
-- for that key, even where the replaced row was valid then: history is not kept.
WITH sources (tier, user_id, source_id, similarity) AS (
    SELECT 0, u.value, u.value, 0.0
    FROM json_each(:users) AS u
    UNION ALL
    SELECT 2, n.user_id, n.neighbour_id, n.similarity
    FROM json_each(:users) AS u
    CROSS JOIN user_neighbours AS n
    WHERE n.version_id = :version AND n.user_id = u.value AND n.created_at <= :t AND n.expires_at > :t
      AND n.similarity > 0
)
SELECT s.tier, s.user_id, p.item_id, s.similarity, p.vector
FROM sources AS s
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = s.source_id AND p.created_at <= :t AND p.expires_at > :t
  AND (s.tier = 0 OR +p.item_id IN (SELECT value FROM json_each(:items)))
UNION ALL
SELECT 3, -1, l.item_id, length(l.neighbours) / 8, l.neighbours
FROM json_each(:items) AS i
CROSS JOIN item_neighbours AS l
WHERE l.version_id = :version AND l.item_id = i.value AND l.created_at <= :t AND l.expires_at > :t
UNION ALL
SELECT 1, a.user_id, -1, 0.0, a.vector
FROM json_each(:users) AS u
CROSS JOIN user_aggregates AS a
WHERE a.version_id = :version AND a.user_id = u.value AND a.created_at <= :t AND a.expires_at > :t
UNION ALL
SELECT 4, e.user_id, -1, e.item_count, e.counts
FROM json_each(:users) AS u
CROSS JOIN exposure_counts AS e
WHERE e.user_id = u.value AND e.created_at <= :t AND e.expires_at > :t
