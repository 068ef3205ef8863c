-- Every item list of a version with its generation, in one statement (one snapshot), for the reader's
-- in-memory copy (solaris/store/item_lists.py); no row when the version has no generation, one row of NULL
-- lists when it has one but no lists. Point in time is applied per read, on the copy.
SELECT g.generation, l.item_id, l.created_at, l.expires_at, l.neighbours
FROM item_list_generations AS g
LEFT JOIN item_neighbours AS l ON l.version_id = g.version_id
WHERE g.version_id = :version
ORDER BY l.item_id
