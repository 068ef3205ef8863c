-- Every tier of a request in one statement (one round trip, one snapshot). Rows are tagged by tier:
--   0 pair:       user_id, item_id, vector
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
--   3 A2A:        user_id, item_id, similarity, vector (the user's fresh pair (u, j) for each fresh item
--                 neighbour j of the item, with that neighbour's similarity > 0)
-- and come back as one row of columns (arrays, and the vectors' bytes back to back, in the same order),
-- read in binary straight into numpy: one result row, not one Python tuple per tier row.
-- %(users)s and %(items)s are the distinct requested ids; the store keeps the requested (user, item) pairs
-- of the users x items answer. `sources` lists whose pairs each requested user needs (itself for tier 0, its
-- neighbours for tier 2), so the pair table is read by one bitmap scan per live partition over all those
-- users at once (an array of keys), the items kept by a hash of the requested ones, and each pair row
-- joined by hash to the requests it answers. The plan is pinned by the reader session (read_session.sql):
-- hash joins only and one generic plan, whatever the statistics of the partitions say.
-- Tier 3 hashes the requested items' lists (one bitmap scan of item_neighbours' primary key: n x k rows, on
-- the few pages each list was written to) against the user's fresh pairs (one bitmap scan per partition,
-- all ~200 of them, not only the requested items). Driven from the user's pairs instead, through an index on
-- (version_id, neighbour_id), it fetches every list row naming one of the user's items, scattered over the
-- table, to keep the few that belong to a requested item: measured 15 percent slower on bench_store's 1M-row
-- layout (20 neighbours per item), and it needs one more index.
-- Point in time: every table is read with created_at <= t < expires_at, so a read for an earlier hour never
-- sees a row written for a later one. expires_at > t prunes the partitions; created_at <= t is a filter on
-- the rows the bitmap heap scans fetch anyway (for their vectors), so it needs no index. Each table keeps
-- one row per key (a write replaces the key's older row), so a read before the newer row's created_at finds
-- nothing for that key, even where the replaced row was valid then: history is not kept.
WITH sources AS MATERIALIZED (
    SELECT 0 AS tier, u.user_id, u.user_id AS source_id, 0::real AS similarity
    FROM unnest(%(users)s::bigint[]) AS u (user_id)
    UNION ALL
    SELECT 2, user_id, neighbour_id, similarity
    FROM user_neighbours
    WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[])
      AND created_at <= %(t)s AND expires_at > %(t)s AND similarity > 0
), tiers AS (
    SELECT s.tier, s.user_id, p.item_id, s.similarity, p.vector
    FROM pair_embeddings AS p
    JOIN sources AS s ON s.source_id = p.user_id
    WHERE p.version_id = %(version)s AND p.expires_at > %(t)s AND p.created_at <= %(t)s
      AND p.user_id = ANY(ARRAY(SELECT source_id FROM sources))
      AND p.item_id IN (SELECT unnest(%(items)s::bigint[]))
    UNION ALL
    SELECT 3, p.user_id, n.item_id, n.similarity, p.vector
    FROM item_neighbours AS n
    JOIN pair_embeddings AS p ON p.item_id = n.neighbour_id
    WHERE n.version_id = %(version)s AND n.item_id = ANY(%(items)s::bigint[])
      AND n.created_at <= %(t)s AND n.expires_at > %(t)s AND n.similarity > 0
      AND p.version_id = %(version)s AND p.user_id = ANY(%(users)s::bigint[])
      AND p.expires_at > %(t)s AND p.created_at <= %(t)s
    UNION ALL
    SELECT 1, user_id, -1, 0, vector
    FROM user_aggregates
    WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[])
      AND created_at <= %(t)s AND expires_at > %(t)s
)
SELECT coalesce(array_agg(tier), '{}'), coalesce(array_agg(user_id), '{}'), coalesce(array_agg(item_id), '{}'),
       coalesce(array_agg(similarity), '{}'), coalesce(string_agg(vector, ''::bytea), ''::bytea)
FROM tiers
