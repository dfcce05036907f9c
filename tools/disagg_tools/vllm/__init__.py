"""Real vLLM on this machine: a tiny local Llama checkpoint (``disagg model``,
:mod:`.checkpoint`; no model hub needed) and what the tools read of vLLM's runs
(:mod:`.rules`: the KV-transfer figures it logs, the P/D judge of top logprobs).
"""
