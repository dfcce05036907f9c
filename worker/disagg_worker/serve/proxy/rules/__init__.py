"""The proxy's rules: the routing policy (:mod:`.routing`: the path per request, the prefix
index, the affinity order), the request fields checked before the prefill hop
(:mod:`.fields`), and each pool's measured rate and shedding bound (:mod:`.shedding`).

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
