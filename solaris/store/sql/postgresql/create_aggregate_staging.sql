CREATE TEMP TABLE aggregate_staging (user_id BIGINT, vector BYTEA, pair_count BIGINT) ON COMMIT DROP
