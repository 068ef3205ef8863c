"""The training chain: FM -> AE -> VM variants -> promotion gate, in one process or as the DAG's steps."""
