"""The fallback hierarchy and what fills it beyond direct pair embeddings: the tiers as the VM sees them,
24-hour user aggregates and the user KNN neighbour table. Below precompute, serving and eval, which all
build the VM's inputs from it."""
