-- Formatted with one of the store's own table names ({table}); takes a lock that neither reads nor writes wait on.
ANALYZE {table}
