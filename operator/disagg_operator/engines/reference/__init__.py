"""The reference engine (``disagg worker serve``): the built-in seeded transformer of the
worker, cpu or cuda, TP 1 (:mod:`.engine`)."""
