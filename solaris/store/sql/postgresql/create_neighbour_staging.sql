CREATE TEMP TABLE neighbour_staging (user_id BIGINT, neighbour_id BIGINT, similarity REAL) ON COMMIT DROP
