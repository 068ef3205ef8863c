-- Feature-store schema, SQLite. Times are integer UTC epoch microseconds; vectors are little-endian
-- float16 (or the version's dtype) bytes. Mirrored by solaris/store/tables.py (tests/store/test_schema.py).
CREATE TABLE IF NOT EXISTS embedding_versions (
    version_id TEXT NOT NULL PRIMARY KEY,
    fm_version TEXT NOT NULL,
    ae_version TEXT NOT NULL,
    dim INTEGER NOT NULL,
    dtype TEXT NOT NULL,
    created_at BIGINT NOT NULL
);

CREATE TABLE IF NOT EXISTS pair_embeddings (
    version_id TEXT NOT NULL,
    user_id BIGINT NOT NULL,
    item_id BIGINT NOT NULL,
    vector BLOB NOT NULL,
    score REAL NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (version_id, user_id, item_id)
);
CREATE INDEX IF NOT EXISTS pair_embeddings_expires_at ON pair_embeddings (expires_at);

CREATE TABLE IF NOT EXISTS user_aggregates (
    version_id TEXT NOT NULL,
    user_id BIGINT NOT NULL,
    vector BLOB NOT NULL,
    pair_count INTEGER NOT NULL,
    window_hours INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (version_id, user_id)
);
CREATE INDEX IF NOT EXISTS user_aggregates_expires_at ON user_aggregates (expires_at);

CREATE TABLE IF NOT EXISTS user_neighbours (
    version_id TEXT NOT NULL,
    user_id BIGINT NOT NULL,
    neighbour_id BIGINT NOT NULL,
    similarity REAL NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (version_id, user_id, neighbour_id)
);
CREATE INDEX IF NOT EXISTS user_neighbours_expires_at ON user_neighbours (expires_at);

-- The A2A tier's item lists, one row per item: its similar items as little-endian int32 ids, then their
-- float32 similarities (k of each, padded with id -1). A read fetches the requested items' rows by key and
-- matches them to the user's pairs in numpy: one row per item, not k.
CREATE TABLE IF NOT EXISTS item_neighbours (
    version_id TEXT NOT NULL,
    item_id BIGINT NOT NULL,
    neighbours BLOB NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    run_id TEXT NOT NULL,
    PRIMARY KEY (version_id, item_id)
);
CREATE INDEX IF NOT EXISTS item_neighbours_expires_at ON item_neighbours (expires_at);

-- Each version's item lists carry a generation, moved in the transaction of every write of its lists and of
-- every expiry that deletes lists: the lists change once an hour, so a reader holds a version's lists in
-- memory and reads only their generation with each request (solaris/store/item_lists.py).
CREATE TABLE IF NOT EXISTS item_list_generations (
    version_id TEXT NOT NULL PRIMARY KEY,
    generation BIGINT NOT NULL
);
-- Lists written before generations existed get one.
INSERT INTO item_list_generations (version_id, generation)
SELECT DISTINCT version_id, 1 FROM item_neighbours WHERE true
ON CONFLICT (version_id) DO NOTHING;

-- Each user's impression counters (solaris/exposure.py), one row per user, not scoped to an embedding
-- version: its count per window, then the item ids it was shown, then each one's count per window, as
-- little-endian int32 (codec.encode_exposure); item_count says how many items. A read fetches the requested
-- users' rows by key: one row per user, not one per (user, item).
CREATE TABLE IF NOT EXISTS exposure_counts (
    user_id BIGINT NOT NULL PRIMARY KEY,
    counts BLOB NOT NULL,
    item_count INTEGER NOT NULL,
    created_at BIGINT NOT NULL,
    expires_at BIGINT NOT NULL,
    run_id TEXT NOT NULL
);
CREATE INDEX IF NOT EXISTS exposure_counts_expires_at ON exposure_counts (expires_at);

CREATE TABLE IF NOT EXISTS precompute_runs (
    run_id TEXT NOT NULL PRIMARY KEY,
    interval_start BIGINT NOT NULL,
    interval_end BIGINT NOT NULL,
    fm_version TEXT NOT NULL,
    ae_version TEXT NOT NULL,
    vm_version TEXT NOT NULL,
    embedding_version TEXT NOT NULL,
    status TEXT NOT NULL,
    counts TEXT NOT NULL,
    timings TEXT NOT NULL,
    started_at BIGINT NOT NULL,
    finished_at BIGINT,
    figures TEXT NOT NULL
);
