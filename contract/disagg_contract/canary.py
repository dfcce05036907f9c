"""What a transfer canary reports of the P→D path: the reasons the worker's canary gives
and the operator's TransferPathReady condition carries (docs/operator.md), and how the
operator tells a canary which wire to expect (``--expect-wire``).

Pure data, read by both sides.
"""

from __future__ import annotations

from disagg_contract.ucx import WIRES

# The canary passed, but the decode computed the prompt itself instead of reading KV.
RECOMPUTED = "DecodeRecomputing"
# The canary passed with KV moving below the floor its derivation expects.
SLOW = "SlowTransport"
# The prefill hop ran out of its deadline, or answered that it is full.
BUSY = "PrefillBusy"
# Nothing accepts the prefill hop.
UNREACHABLE = "PrefillUnreachable"
# The canary passed, but UCX moved its wire probe over a transport the derivation does not
# expect there (tcp where shared memory or RDMA was expected).
UNEXPECTED_TRANSPORT = "UnexpectedTransport"

# What the operator's derivation expects of the wire, per place UCX sees the peer in (its
# ucp endpoint configuration names), told to the canary as `--expect-wire SCOPE=WIRE[,WIRE]`.
SCOPES = ("intra-node", "inter-node")


def expect_wire_args(expected: dict[str, tuple[str, ...]]) -> list[str]:
    """The canary's ``--expect-wire`` arguments for ``expected`` (scope → wires)."""
    out: list[str] = []
    for scope in SCOPES:
        if expected.get(scope):
            out += ["--expect-wire", f"{scope}={','.join(expected[scope])}"]
    return out


def parse_expect_wire(text: str) -> tuple[str, tuple[str, ...]]:
    """(scope, wires) of one ``--expect-wire`` value; ValueError naming the fix."""
    scope, _, listed = text.partition("=")
    wires = tuple(w.strip() for w in listed.split(",") if w.strip())
    if scope not in SCOPES or not wires or any(w not in WIRES for w in wires):
        raise ValueError(
            f"--expect-wire {text!r}: give SCOPE=WIRE[,WIRE], SCOPE one of "
            f"{', '.join(SCOPES)}, WIRE one of {', '.join(WIRES)}"
        )
    return scope, wires


# Where a prefill pod's wire peer (`disagg worker wire peer`) listens for decode pods' probes.
WIRE_PEER_PORT = 8091
