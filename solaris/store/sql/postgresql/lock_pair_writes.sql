-- Session lock serialising pair writers and partition drops: the pair key is kept unique across
-- partitions by delete-then-insert, which two concurrent writers of one key could otherwise interleave.
SELECT pg_advisory_lock(hashtext('solaris.pair_embeddings'))
