"""Validation: a DisaggregatedDeployment body → the model and every problem, each naming its
field and the fix (:mod:`.spec`).

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
