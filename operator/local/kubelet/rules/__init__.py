"""The local kubelet's rules: probes as a kubelet runs them (:mod:`.probes`), the
EndpointSlices and name table of Ready pods (:mod:`.endpoints`), a pod of the API as
processes at its own address (:mod:`.containers`).

Pure layer: no processes, no API calls (the import contract in pyproject.toml holds it to it).
"""
