"""Real vLLM next to the worker: what running `vllm serve` on this machine needs.

``checkpoint`` writes a tiny local Llama checkpoint (no model hub needed); ``metrics``
(pure) reads the KV-transfer figures vLLM logs. Only imported when asked for: the
worker itself never needs vLLM.
"""
