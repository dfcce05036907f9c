"""Engines: one interface (:mod:`.base`), one folder per engine (:mod:`.vllm`,
:mod:`.reference`), and the settings that name the engines and platforms an operator
serves (:mod:`.settings`). Nothing else in the operator asks which engine a spec runs.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
