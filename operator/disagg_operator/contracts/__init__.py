"""Contracts of the projects the operator renders for beside its engines (bottom layer,
pure data): what llm-d's routing sidecar and endpoint picker take (:mod:`.llmd`), the
LeaderWorkerSet API (:mod:`.lws`), Prometheus' (:mod:`.prometheus`), the Gateway API
Inference Extension's InferencePool (:mod:`.inference_pool`). One table per external
contract; render, validation, docs and the contract tests read it. A contract whose kind
is a CRD also declares the shape render writes of it (in :mod:`.shape`'s vocabulary),
which the emulator's checker holds rendered objects to. An engine's own contract lives in
its folder (vLLM's: ``engines/vllm/contract.py``).

Pure layer: no I/O (the import contract in pyproject.toml holds this package to it).
"""
