"""The transfer subsystem's rules: the KV layout (:mod:`.layout`), the read plan
(:mod:`.plan`), the side-channel frames (:mod:`.protocol`), leases and claims
(:mod:`.leases`), ranks of different sizes (:mod:`.ranks`), UCX's protocol report
(:mod:`.ucx_report`).

Pure layer: no NIXL, no sockets (the import contract in pyproject.toml holds it to it).
"""
