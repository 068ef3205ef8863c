-- Transaction lock serialising neighbour-list writers: a user's list is replaced by delete-then-insert, which
-- two concurrent writers of one user would otherwise interleave (a duplicate key, or both lists mixed).
SELECT pg_advisory_xact_lock(hashtext('solaris.user_neighbours'))
