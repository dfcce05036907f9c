"""What the worker benchmarks compute: spreads (:mod:`.spread`) and the routing figures
(:mod:`.routing_figures`).

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
