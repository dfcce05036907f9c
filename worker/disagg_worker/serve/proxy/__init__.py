"""The P/D proxy (`disagg proxy`): a request's two hops, prefill then decode, over pools
of workers.

The two-hop request flow (:mod:`.flow`), its HTTP app and command line (:mod:`.app`), the
fields refused before any hop (:mod:`.rules.fields`), the read-only routes a decode
engine answers (:mod:`.readonly`), the worker pools and what a failed hop answers
(:mod:`.upstream`), the Services that keep the pools current (:mod:`.discovery`), the
routing policy (:mod:`.rules.routing`) and the proxy's metrics (:mod:`.metrics`)."""
