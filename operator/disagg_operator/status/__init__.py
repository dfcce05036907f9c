"""Status: what the custom resource reports: its conditions and counts (:mod:`.conditions`)
and the transfer canaries' verdict (:mod:`.transfer_path`).

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
