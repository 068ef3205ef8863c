-- Every tier of a request in one statement (one snapshot, one prepared statement), rows tagged by tier:
--   0 pair:       user_id, item_id, vector: every fresh pair of a requested user, requested or not (the
--                 A2A tier needs the user's codes for the items like the requested ones)
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
--   3 item lists: the generation of the version's item lists (in user_id; no row if it has none), no bytes:
--                 the reader holds the lists in memory and reloads them when the generation moved
--                 (read_item_lists.sql), since they change once an hour; reading the requested items'
--                 200 rows here took 0.35-0.6 ms of a 1.5 ms statement (bench_store, 1M pair rows)
--   4 exposure:   user_id, its item count (as similarity), its packed counters (item_id -1; any version)
-- :users and :items are JSON arrays of the distinct requested ids; the store keeps the requested (user,
-- item) pairs of the users x items answer and matches the A2A tier's lists to the user's pairs in numpy.
-- A requested user's own pairs are one range scan of the primary key. Its neighbours' pairs take two
-- steps: `neighbour_pairs` scans each neighbour's key range on the key index alone (a covering scan, the
-- item tested against one set of the requested items: +item_id), and only the pairs it keeps (1 in 20 in
-- bench_store) are then fetched by rowid for the time test and the vector. Testing the time in the scan
-- fetched every scanned row: 1.25 ms against 0.72 ms for 10 neighbours x 200 pairs.
-- Point in time: every table is read with created_at <= :t < expires_at, so a read for an earlier hour never
-- sees a row written for a later one (a filter on the rows fetched anyway; no index). Each table keeps one
-- row per key (an upsert replaces the older row), so a read before the newer row's created_at finds nothing
-- for that key, even where the replaced row was valid then: history is not kept.
WITH neighbour_pairs AS MATERIALIZED (
    SELECT p.rowid AS pair_row, n.user_id AS user_id, n.similarity AS similarity
    FROM json_each(:users) AS u
    CROSS JOIN user_neighbours AS n
    CROSS JOIN pair_embeddings AS p
    WHERE n.version_id = :version AND n.user_id = u.value AND n.created_at <= :t AND n.expires_at > :t
      AND n.similarity > 0
      AND p.version_id = :version AND p.user_id = n.neighbour_id AND +p.item_id IN (SELECT value FROM json_each(:items))
)
SELECT 0, p.user_id, p.item_id, 0.0, p.vector
FROM json_each(:users) AS u
CROSS JOIN pair_embeddings AS p
WHERE p.version_id = :version AND p.user_id = u.value AND p.created_at <= :t AND p.expires_at > :t
UNION ALL
SELECT 2, m.user_id, p.item_id, m.similarity, p.vector
FROM neighbour_pairs AS m
CROSS JOIN pair_embeddings AS p
WHERE p.rowid = m.pair_row AND p.created_at <= :t AND p.expires_at > :t
UNION ALL
SELECT 3, g.generation, -1, 0, x''
FROM item_list_generations AS g
WHERE g.version_id = :version
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
