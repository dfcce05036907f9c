"""The proxy's routing policy (:mod:`.routing`): the path per request, the prefix index, the
affinity order.

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
