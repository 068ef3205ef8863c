COPY aggregate_staging (user_id, vector, pair_count) FROM STDIN (FORMAT BINARY)
