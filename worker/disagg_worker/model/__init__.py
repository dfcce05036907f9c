"""Reference model subsystem: a tiny seeded transformer over a paged KV cache.

``presets`` (pure: the model shapes ``spec.model`` may name), ``kvcache`` (the paged cache
and its allocator), ``model`` (:class:`ReferenceModel`). It uses the transfer subsystem's
layout, never its I/O.
"""
