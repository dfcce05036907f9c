"""What the benchmarks compute and send, apart from running anything: figures, requests,
frames and manifests.

Their figures (:mod:`.e2e_vllm_figures`, :mod:`.fault_figures`, :mod:`.flood_figures`,
:mod:`.rollout_figures`, :mod:`.routing_figures`, spreads: :mod:`.spread`, the table of
verdicts the fault and flood benchmarks share: :mod:`.verdicts`), the requests
and frames the fault benchmark sends (:mod:`.fault_requests`, :mod:`.hostile_frames`) and
the manifests they apply (:mod:`.manifests`).

Pure layer: no I/O (the import contract in pyproject.toml holds it to it).
"""
