"""Render: a DisaggregatedDeployment → every child object it should own, and the CRD.

``objects`` (the whole set: Secret, Services, NetworkPolicy, budgets, Pods,
InferencePool), ``pods`` (one pod: the engine's container and what every pod gets),
``canary`` (the decode pods' transfer-canary container), ``kvkey`` (the KV-compatibility
key and revision), ``crd`` (the CustomResourceDefinition, from the API models and the
engines), ``derivation`` (docs/derivation.md). The commands over it (``disagg render``,
``disagg crd``) are :mod:`disagg_operator.commands`; the settings' flags,
:mod:`disagg_operator.controller.options`.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
