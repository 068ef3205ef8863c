-- Formatted with an integer {hour}; every row in the partition has expires_at below its upper bound.
DROP TABLE IF EXISTS pair_embeddings_h{hour}
