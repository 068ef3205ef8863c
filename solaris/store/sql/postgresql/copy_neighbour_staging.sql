COPY neighbour_staging (owner_id, neighbour_id, similarity) FROM STDIN (FORMAT BINARY)
