"""disagg worker: NIXL KV-cache transfer between prefill and decode, and a reference engine."""
