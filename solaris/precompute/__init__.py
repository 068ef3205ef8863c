"""The hourly speculative precompute: candidates, verifier selection, freshness checks and run staging."""
