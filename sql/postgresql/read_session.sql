-- Set once on each serving-read connection. A user's pairs lie on a few heap pages (a write stages them
-- together), and read_tiers.sql scans ~200 of them per user and neighbour: a bitmap heap scan visits each
-- page once, where a plain index scan pins the page again for every row (measured: read_tiers executes
-- ~25% faster on 1M pairs). Only the reader connections carry this setting.
SET enable_indexscan = off
