"""The controller (I/O shell and its pure helpers): kopf handlers, the reconciler and one
sync pass, the watch-fed cache, the API client, retries, refusals, handshake keys, leader
election, health, metrics and `disagg operator` itself."""
