"""KV transfer subsystem: NIXL registration, the side-channel handshake, transfer plans
and the decode-initiated READ of prefill's KV blocks (or the prefill's push).

Pure: :mod:`.rules` (``layout``, ``protocol``, ``plan``, ``leases``, ``ranks``). I/O:
``nixl_agent``, ``nixl_compat``, ``handshake``, ``peers``, ``holder``, ``pushes``,
``mailbox``, ``registration`` (the caches registered with NIXL), ``prefill`` (publish,
hold, answer claims and pushes), ``decode`` (READ, or receive a push), ``agent`` (the two
sides over one registration, started and closed together), ``reads`` (posting decode's
READs), ``copy`` (device↔host block copies), ``telemetry``, ``probe``, ``peer_process``.
Nothing here imports the reference model or the HTTP layer.
"""
