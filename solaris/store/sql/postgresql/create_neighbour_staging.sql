CREATE TEMP TABLE neighbour_staging (owner_id BIGINT, neighbour_id BIGINT, similarity REAL) ON COMMIT DROP
