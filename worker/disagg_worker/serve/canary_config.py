"""The transfer canary's settings: one frozen value, built where its command line is parsed.

I/O layer, a plain value (the operator's ``OperatorConfig`` is the model):
``disagg worker canary`` builds it from its flags (:func:`from_args`), tests build it
directly, and :class:`~disagg_worker.serve.canary.Canary` takes it whole; the two hops'
share of it (deadline, protocol) goes on to the canary's proxy as a
:class:`~disagg_worker.serve.proxy.config.ProxyConfig`.
"""

from __future__ import annotations

import argparse
from collections.abc import Mapping
from dataclasses import dataclass, field
from urllib.parse import urlsplit

from disagg_worker.serve.pd import KV_TRANSFER_PARAMS, PdProtocol
from disagg_worker.serve.proxy.config import ProxyConfig
from disagg_worker.serve.rules.otlp import Settings

# the canary's hops start unsampled traces: the workers (ParentBased) record none of them
UNTRACED = Settings(service="disagg-canary", ratio=0.0)


@dataclass(frozen=True)
class CanaryConfig:
    """What one canary proves, and how often.

    ``prefill``: the prefill pool's URL; ``decode``: this pod's engine URL (neither with a
    trailing slash); ``model``: what the engines serve; ``timeout_s``: one deadline over
    both hops; ``interval_s``: at most one canary per this; ``fresh_s``: how long a pass
    counts; ``min_gbps``: the KV bandwidth floor in GB/s (None: none); ``protocol``: the
    engines' P/D protocol; ``prefill_ranks``, ``decode_ranks``: the data-parallel engines
    of a prefill pod and of this pod, each proven by a request of its own;
    ``wire_peer_port``: where the prefill pods' wire peers listen (None: no wire probe);
    ``expect_wire``: the wires the deployment expects per place UCX sees the peer in
    (scope → wires); ``wire_interval_s``: at most one wire probe per this (a new engine is
    probed at its first pass).
    """

    prefill: str
    decode: str
    model: str
    timeout_s: float
    interval_s: float
    fresh_s: float
    min_gbps: float | None = None
    protocol: PdProtocol = KV_TRANSFER_PARAMS
    prefill_ranks: int = 1
    decode_ranks: int = 1
    wire_peer_port: int | None = None
    expect_wire: Mapping[str, tuple[str, ...]] = field(default_factory=dict)
    wire_interval_s: float = 300.0

    def wire_peer(self) -> str | None:
        """The wire peer's URL: the prefill pool's host (the revision's prefill pods) at
        ``wire_peer_port``; None without one."""
        if self.wire_peer_port is None:
            return None
        host = urlsplit(self.prefill).hostname or ""
        return f"http://{f'[{host}]' if ':' in host else host}:{self.wire_peer_port}"

    def proxy(self) -> ProxyConfig:
        """The settings of the proxy that runs the canary's two hops."""
        return ProxyConfig(timeout_s=self.timeout_s, protocol=self.protocol, tracing=UNTRACED)


def from_args(args: argparse.Namespace) -> CanaryConfig:
    """The settings ``disagg worker canary``'s parsed flags ask for."""
    return CanaryConfig(
        prefill=args.prefill.rstrip("/"),
        decode=args.decode.rstrip("/"),
        model=args.model,
        timeout_s=args.timeout_s,
        interval_s=args.interval_s,
        fresh_s=args.fresh_s,
        min_gbps=args.min_bandwidth_gbps,
        protocol=args.pd_protocol,
        prefill_ranks=args.prefill_ranks,
        decode_ranks=args.decode_ranks,
        wire_peer_port=args.wire_peer_port,
        expect_wire=dict(args.expect_wire or []),
        wire_interval_s=args.wire_interval_s,
    )
