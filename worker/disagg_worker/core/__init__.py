"""What every worker subsystem and the operator build on: the env contract, platforms, UCX
settings, problems and the back-off rule.

The env contract the operator renders and the worker reads (:mod:`.config`), platforms and
the platforms file (:mod:`.platforms`, :mod:`.platform_file`), UCX settings (:mod:`.ucx`),
problems (:mod:`.problems`) and the one back-off rule (:mod:`.backoff`).

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
