"""The controller's rules, apart from its I/O: the watch-fed cache (:mod:`.cache`), the
handshake keys (:mod:`.keys`), refused writes and their back-off (:mod:`.refusals`), and the
leader-election rules on a Lease (:mod:`.lease`).

Pure layer: no API client, no kopf, no event loop (the import contract in pyproject.toml
holds this package to it).
"""
