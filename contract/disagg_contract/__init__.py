"""What the operator and the worker share, and neither owns: the env contract the operator
renders and the worker reads (:mod:`.config`), platforms and the platforms file
(:mod:`.platforms`, :mod:`.platform_file`), UCX settings (:mod:`.ucx`), the reference
model's presets (:mod:`.presets`), the P/D protocols by name (:mod:`.pd`), the canary's
reasons (:mod:`.canary`), problems (:mod:`.problems`), the one back-off rule
(:mod:`.backoff`) and the `disagg` command line's convention (:mod:`.commandline`).

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
