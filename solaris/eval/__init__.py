"""The replay harness: the paper's table on our own data, with the code the DAGs and the ranker run."""
