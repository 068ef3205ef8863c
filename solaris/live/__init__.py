"""Live operation: simulated time that runs on the wall clock, at real speed or accelerated for demos and tests."""
