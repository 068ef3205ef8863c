-- Every tier of a request in one statement (one snapshot, one prepared statement), rows tagged by tier:
--   0 pair:       user_id, item_id, vector
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
--   3 A2A:        user_id, item_id, similarity, vector (the user's fresh pair (u, j) for each fresh item
--                 neighbour j of the item, with that neighbour's similarity > 0)
-- :users and :items are JSON arrays of the distinct requested ids; the store keeps the requested (user,
-- item) pairs of the users x items answer. `sources` lists whose pairs each requested user needs (itself
-- for tier 0, its neighbours for tier 2); each source's pairs are found by one range scan of the primary
-- key with the item test as a filter (+item_id, against one set of the requested items): a scan reads only
-- the slim key index and fetches the rows it keeps, which beats a probe per (source, item), and it stays
-- bounded by what the precompute wrote per user.
-- Tier 3 is driven from the user's own fresh pairs (the range scan of tier 0, without the item test: ~200
-- rows per user), each joined to the item lists that name its item through the covering index on
-- (version_id, neighbour_id, item_id, ...), which answers the list side without fetching a row; the
-- requested items are a filter (+item_id, one set), as for the pairs. So it seeks the small item-list index
-- once per pair of the user and reads the ~k entries that follow. Driven from the requested items instead
-- (their lists by primary key, then a probe of the pair index per (user, neighbour)), it probes the
-- 1M-row pair index 200 x k times: measured 5x slower (bench_store's layout, k = 20: 8.6 vs 1.6 ms p50).
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
  AND +p.item_id IN (SELECT value FROM json_each(:items))
UNION ALL
SELECT 3, p.user_id, n.item_id, n.similarity, p.vector
FROM json_each(:users) AS u
CROSS JOIN pair_embeddings AS p
CROSS JOIN item_neighbours AS n
WHERE p.version_id = :version AND p.user_id = u.value AND p.created_at <= :t AND p.expires_at > :t
  AND n.version_id = :version AND n.neighbour_id = p.item_id AND +n.item_id IN (SELECT value FROM json_each(:items))
  AND n.created_at <= :t AND n.expires_at > :t AND n.similarity > 0
UNION ALL
SELECT 1, a.user_id, -1, 0.0, a.vector
FROM json_each(:users) AS u
CROSS JOIN user_aggregates AS a
WHERE a.version_id = :version AND a.user_id = u.value AND a.created_at <= :t AND a.expires_at > :t
