"""The autoscaling benchmark's model: traces (:mod:`.traces`), the P/D fleet they run
through (:mod:`.fleet`) and the policies compared (:mod:`.policies`).

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
