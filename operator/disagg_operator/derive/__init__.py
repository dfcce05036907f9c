"""Derivation: the values the operator fills in from a spec and the node pools' hardware,
whatever the engine: buffer devices, UCX transports, quantities, pod counts.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
