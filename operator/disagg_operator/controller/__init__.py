"""The controller, the I/O shell around the pure core: kopf handlers, the reconciler and one
sync pass, the API client and `disagg operator` itself.

With them the watch-fed cache, retries, refusals, handshake keys, leader election, health
and metrics; the pure helpers are in :mod:`.rules`."""
