"""The reference model's rules: model presets (:mod:`.presets`) and the KV judge
(:mod:`.judge`).

Pure layer: no torch, no I/O (the import contract in pyproject.toml holds it to it).
"""
