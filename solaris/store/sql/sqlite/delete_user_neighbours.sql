-- A user's neighbour list is replaced whole: the old list goes before the new one is inserted.
DELETE FROM user_neighbours
WHERE version_id = :version AND user_id IN (SELECT value FROM json_each(:users))
