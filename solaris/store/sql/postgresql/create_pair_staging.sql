CREATE TEMP TABLE pair_staging (user_id BIGINT, item_id BIGINT, vector BYTEA, score REAL) ON COMMIT DROP
