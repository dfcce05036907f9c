"""Contracts of the projects the operator renders for (bottom layer, pure data): what each
vLLM release accepts (:mod:`.vllm`) and what llm-d's routing sidecar takes (:mod:`.llmd`).
One table per external contract; render, validation, docs and the contract tests read it.

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
