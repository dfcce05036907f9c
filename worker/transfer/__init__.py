"""KV transfer subsystem: NIXL registration, the side-channel handshake, transfer plans
and the decode-initiated READ of prefill's KV blocks.

Pure: :mod:`.rules` (``layout``, ``protocol``, ``plan``, ``leases``, ``ranks``). I/O:
``nixl_agent``, ``nixl_compat``, ``handshake``, ``peers``, ``holder``, ``engine`` (the
transfer engine), ``reads`` (posting its READs), ``copy`` (device↔host block copies),
``telemetry``, ``probe``, ``peer_process``. Nothing here imports the reference engine or the
HTTP layer.
"""
