"""MLflow: experiments per job, registered models with aliases, pinned versions and compatibility tags."""
