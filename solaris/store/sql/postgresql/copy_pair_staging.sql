COPY pair_staging (user_id, item_id, vector, score) FROM STDIN (FORMAT BINARY)
