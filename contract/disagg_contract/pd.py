"""The P/D protocols by name: what the operator renders into ``--pd-protocol`` and the
worker's proxy, router and canary resolve (``disagg_worker.serve.pd``).

Pure data, read by both sides.
"""

from __future__ import annotations

# vLLM's convention: kv_transfer_params on the prefill hop's answer and the decode hop's
# request; every built-in engine speaks it.
KV_TRANSFER_PARAMS = "kv-transfer-params"
DEFAULT = KV_TRANSFER_PARAMS
# vLLM's API server sends a request to data-parallel engine r of its pod when a header
# says r (entrypoints' _get_data_parallel_rank, vLLM 0.11.1-0.32.0): how the canary
# reaches each engine's side channel.
DP_RANK_HEADER = "X-data-parallel-rank"
