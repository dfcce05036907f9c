"""What a transfer canary reports of the P→D path: the reasons the worker's canary gives
and the operator's TransferPathReady condition carries (docs/operator.md).

Pure data, read by both sides.
"""

from __future__ import annotations

# The canary passed, but the decode computed the prompt itself instead of reading KV.
RECOMPUTED = "DecodeRecomputing"
# The canary passed with KV moving below the floor its derivation expects.
SLOW = "SlowTransport"
# The prefill hop ran out of its deadline, or answered that it is full.
BUSY = "PrefillBusy"
# Nothing accepts the prefill hop.
UNREACHABLE = "PrefillUnreachable"
