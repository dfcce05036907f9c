"""What the local runners decide before they run anything: rendered pods as local processes
(:mod:`.pods`), an instance that spans pods (:mod:`.groups`), the restart back-off
(:mod:`.backoff`), the podman plan (:mod:`.podman`).

Pure layer: no processes, no sockets (the import contract in pyproject.toml holds it to it).
"""
