"""The P/D protocols by name: what the operator renders into ``--pd-protocol`` and the
worker's proxy, router and canary resolve (``disagg_worker.serve.pd``).

Pure data, read by both sides.
"""

from __future__ import annotations

# vLLM's convention: kv_transfer_params on the prefill hop's answer and the decode hop's
# request; every built-in engine speaks it.
KV_TRANSFER_PARAMS = "kv-transfer-params"
DEFAULT = KV_TRANSFER_PARAMS
