"""Kubernetes API emulator for tests and benchmarks: kmock with its gaps fixed.

``server`` (the emulator), ``store`` (its object store: resourceVersions, watch events),
``ops`` (pure object operations: patches, selectors, bookkeeping), ``watch`` (request
wrapper and watch streaming). Never imported by the operator's reconcile path.
"""
