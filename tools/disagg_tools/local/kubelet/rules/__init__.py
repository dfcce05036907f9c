"""The local kubelet's rules, each ported from Kubernetes 1.36 and checked against its
upstream test cases: probes as a kubelet runs them (:mod:`.probes`), restarts, phase and
conditions (:mod:`.lifecycle`), the EndpointSlices and name table of a Service
(:mod:`.endpoints`), a pod of the API as processes at its own address (:mod:`.containers`).

Pure layer: no processes, no API calls (the import contract in pyproject.toml holds it to it).
"""
