-- Transaction lock serialising the writers of one neighbour table ({table}; one lock per table): a list is
-- replaced by delete-then-insert, which two concurrent writers of one owner would otherwise interleave (a
-- duplicate key, or both lists mixed).
SELECT pg_advisory_xact_lock(hashtext('solaris.{table}'))
