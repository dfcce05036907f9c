"""Local runs: ``disagg up`` renders a manifest with the operator's own code and runs the
pods' commands as processes on this machine."""
