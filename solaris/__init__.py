"""SOLARIS: speculative precompute of foundation-model embeddings for online ranking."""

__version__ = "0.1.0"
