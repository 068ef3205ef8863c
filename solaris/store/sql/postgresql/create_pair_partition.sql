-- Formatted with integers only ({hour}, {lower}, {upper}): DDL takes no bind parameters. Run in its own
-- short transaction: creating a partition locks the parent table exclusively.
CREATE TABLE IF NOT EXISTS pair_embeddings_h{hour} PARTITION OF pair_embeddings
FOR VALUES FROM ({lower}) TO ({upper})
