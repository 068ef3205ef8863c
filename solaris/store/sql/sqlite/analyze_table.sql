-- Formatted with one of the store's own table names ({table}).
ANALYZE {table}
