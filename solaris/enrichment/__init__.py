"""Coverage beyond direct pair embeddings: 24-hour user aggregates and the user KNN neighbour table."""
