-- A neighbour list is replaced whole: the old list goes before the new one is inserted. Formatted with a
-- neighbour table ({table}: user_neighbours or item_neighbours) and its key column ({owner_id}).
DELETE FROM {table}
WHERE version_id = %(version)s AND {owner_id} = ANY(%(owners)s::bigint[])
