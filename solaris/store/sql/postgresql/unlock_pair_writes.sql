SELECT pg_advisory_unlock(hashtext('solaris.pair_embeddings'))
