"""Event data: the schema, hour-partitioned Parquet IO, the synthetic world and log importers."""
