"""The API server's semantics the emulator adds to kmock: object operations (patches, label
selectors, write bookkeeping: :mod:`.ops`), the scale subresource (:mod:`.scale`), the
printer columns of ``kubectl get`` (:mod:`.tables`).

Pure layer: no HTTP, no kmock (the import contract in pyproject.toml holds it to it).
"""
