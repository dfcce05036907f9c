"""What the worker reads of real vLLM: the KV-transfer figures vLLM logs (:mod:`.metrics`)
and the P/D judge of per-position top logprobs (:mod:`.judge`).

Pure layer: no vLLM, no I/O (the import contract in pyproject.toml holds it to it).
"""
