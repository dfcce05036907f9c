"""The HTTP layer's rules: what a request may hold, what the worker answers, and the
transfer canary's verdict.

The request contract (:mod:`.openai`), the ``kv_transfer_params`` a decode reads
(:mod:`.kv_params`), what a client may send (:mod:`.limits`), what the worker answers
(:mod:`.shapes`), where its time went (:mod:`.timings`) and the transfer canary's verdict
(:mod:`.canary_verdict`). The params and the figures are typed frozen values
(``KvTransferParams``, ``Timings``), dicts only on the wire.

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
