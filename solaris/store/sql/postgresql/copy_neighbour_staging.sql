COPY neighbour_staging (user_id, neighbour_id, similarity) FROM STDIN (FORMAT BINARY)
