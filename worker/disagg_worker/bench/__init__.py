"""Worker benchmarks: scripts that print figures (JSON and a table), never tests."""
