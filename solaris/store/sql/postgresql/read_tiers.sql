-- Every tier of a request in one statement (one round trip, one snapshot). Rows are tagged by tier:
--   0 pair:       user_id, item_id, vector: every fresh pair of a requested user, requested or not (the
--                 A2A tier needs the user's codes for the items like the requested ones)
--   1 aggregate:  user_id, vector (item_id -1)
--   2 neighbour:  user_id, item_id, similarity, vector (a fresh neighbour's fresh pair; similarity > 0)
--   3 item lists: the generation of the version's item lists (in user_id; no row if it has none), no bytes:
--                 the reader holds the lists in memory and reloads them when the generation moved
--                 (read_item_lists.sql), since they change once an hour; reading the requested items'
--                 200 rows here cost 0.6-0.8 ms (bench_store, 1M pair rows)
--   4 exposure:   user_id, its item count (as similarity), its packed counters (item_id -1; any version)
-- and come back as one row of columns (arrays, and the rows' bytes back to back, in the same order),
-- read in binary straight into numpy: one result row, not one Python tuple per tier row.
-- %(users)s and %(items)s are the distinct requested ids; the store keeps the requested (user, item) pairs
-- of the users x items answer and matches the A2A tier's lists to the user's pairs in numpy. The pair table
-- is read by one bitmap scan per live partition for the users, one for their neighbours (an array of
-- keys, the items kept by a hash of the requested ones), each neighbour pair joined by hash to the users
-- it answers. The plan is pinned by the reader session (read_session.sql): hash joins only and one generic
-- plan, whatever the statistics of the partitions say.
-- A user's counters are found by their key alone (expires_at + 0: no index on it): the generic plan ANDed
-- in a bitmap of the expires_at index, every user's counters, for one row (0.5 ms of the read).
-- Point in time: every table is read with created_at <= t < expires_at, so a read for an earlier hour never
-- sees a row written for a later one. expires_at > t prunes the partitions; created_at <= t is a filter on
-- the rows the bitmap heap scans fetch anyway (for their vectors), so it needs no index. Each table keeps
-- one row per key (a write replaces the key's older row), so a read before the newer row's created_at finds
-- nothing for that key, even where the replaced row was valid then: history is not kept.
WITH neighbours AS MATERIALIZED (
    SELECT user_id, neighbour_id, similarity
    FROM user_neighbours
    WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[])
      AND created_at <= %(t)s AND expires_at > %(t)s AND similarity > 0
), tiers AS (
    SELECT 0 AS tier, p.user_id, p.item_id, 0::real AS similarity, p.vector
    FROM pair_embeddings AS p
    WHERE p.version_id = %(version)s AND p.expires_at > %(t)s AND p.created_at <= %(t)s
      AND p.user_id = ANY(%(users)s::bigint[])
    UNION ALL
    SELECT 2, n.user_id, p.item_id, n.similarity, p.vector
    FROM pair_embeddings AS p
    JOIN neighbours AS n ON n.neighbour_id = p.user_id
    WHERE p.version_id = %(version)s AND p.expires_at > %(t)s AND p.created_at <= %(t)s
      AND p.user_id = ANY(ARRAY(SELECT neighbour_id FROM neighbours))
      AND p.item_id IN (SELECT unnest(%(items)s::bigint[]))
    UNION ALL
    SELECT 3, generation, -1, 0, ''::bytea
    FROM item_list_generations
    WHERE version_id = %(version)s
    UNION ALL
    SELECT 1, user_id, -1, 0, vector
    FROM user_aggregates
    WHERE version_id = %(version)s AND user_id = ANY(%(users)s::bigint[])
      AND created_at <= %(t)s AND expires_at > %(t)s
    UNION ALL
    SELECT 4, user_id, -1, item_count::real, counts
    FROM exposure_counts
    WHERE user_id = ANY(%(users)s::bigint[]) AND created_at <= %(t)s AND expires_at + 0 > %(t)s
)
SELECT coalesce(array_agg(tier), '{}'), coalesce(array_agg(user_id), '{}'), coalesce(array_agg(item_id), '{}'),
       coalesce(array_agg(similarity), '{}'), coalesce(string_agg(vector, ''::bytea), ''::bytea)
FROM tiers
