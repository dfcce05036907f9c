"""The P/D proxy's settings: one frozen value, built where its command line is parsed.

I/O layer, a plain value (the operator's ``OperatorConfig`` is the model):
``disagg proxy`` builds it from its flags (:func:`from_args`), the canary and tests build it
directly, and :class:`~disagg_worker.serve.proxy.flow.Proxy` takes it whole beside its pools,
which are collaborators (kept current by refreshers), not settings.
"""

from __future__ import annotations

import argparse
import os
from dataclasses import dataclass, field

from disagg_worker.serve.pd import KV_TRANSFER_PARAMS, PdProtocol
from disagg_worker.serve.proxy.rules.locality import check_mode
from disagg_worker.serve.proxy.rules.routing import Policy
from disagg_worker.serve.rules.otlp import Settings, settings_of

SERVICE = "disagg-router"  # service.name of the proxy's spans unless OTEL_SERVICE_NAME says


@dataclass(frozen=True)
class ProxyConfig:
    """How one proxy routes and how long it waits.

    ``policy``: how a worker is picked for each hop in the pools the proxy makes from worker
    URLs (``--policy``; pools passed in keep their own); ``timeout_s``: the one deadline
    over both hops; ``prefill_retries``: how often a decode whose KV read failed is retried
    from another prefill (0: never); ``routing``: decode alone or both hops, and prefix
    affinity; ``protocol``: how the engines are told to split a request;
    ``pool_queue_s``: the longest a pool's queue may take to start a new request before
    the request is shed (None: a third of ``timeout_s``; 0: never shed); ``tracing``: where
    its spans are exported (``--otlp-traces-endpoint`` or the OpenTelemetry variables;
    none by default); ``locality``: whether each prefill->decode pair stays in one zone,
    ``Required`` or ``Preferred`` (None: any pair; docs/routing.md, Transfer locality).
    """

    policy: str = "round-robin"
    timeout_s: float = 60.0
    prefill_retries: int = 1
    routing: Policy = field(default_factory=Policy)
    protocol: PdProtocol = KV_TRANSFER_PARAMS
    pool_queue_s: float | None = None
    tracing: Settings = field(default_factory=lambda: Settings(service=SERVICE))
    locality: str | None = None

    def __post_init__(self) -> None:
        check_mode(self.locality)
        if self.pool_queue_s is not None and not self.pool_queue_s >= 0:
            raise ValueError(
                f"--pool-queue-s: {self.pool_queue_s:g} is below 0; give the seconds a pool's "
                "queue may take to start a request (0: never shed)"
            )

    @property
    def queue_s(self) -> float:
        """The shedding budget in force: ``pool_queue_s``, by default a third of the
        deadline. One deadline covers a P/D request's wait in the prefill pool, its wait in
        the decode pool and the work of both hops: a third each (docs/routing.md)."""
        return self.timeout_s / 3 if self.pool_queue_s is None else self.pool_queue_s


DEFAULT = ProxyConfig()


def _endpoint(text: str) -> tuple[str, str]:
    url, sep, address = text.partition("=")
    if not sep or not url or not address.startswith("tcp://"):
        raise ValueError(f"--kv-events-endpoint: {text!r}: write URL=tcp://HOST:PORT")
    return url.rstrip("/"), address


def from_args(args: argparse.Namespace) -> ProxyConfig:
    """The settings ``disagg proxy``'s parsed flags ask for (ValueError names the flag
    whose value the routing policy refuses)."""
    routing = Policy(
        mode=args.disaggregate,
        threshold_tokens=args.threshold_tokens,
        prefill_queue_limit=args.prefill_queue_limit,
        prefix_cache=args.decode_prefix_cache,
        block_tokens=args.block_tokens,
        prefix_index=args.prefix_index,
        kv_events_port=args.kv_events_port,
        kv_events_topic=args.kv_events_topic,
        hash_algo=args.kv_hash_algo,
        hash_seed=args.kv_hash_seed,
        kv_events_endpoints=tuple(_endpoint(e) for e in args.kv_events_endpoint or ()),
    )
    return ProxyConfig(
        policy=args.policy,
        timeout_s=args.timeout_s,
        prefill_retries=args.prefill_retries,
        routing=routing,
        protocol=args.pd_protocol,
        pool_queue_s=args.pool_queue_s,
        tracing=settings_of(os.environ, args.otlp_traces_endpoint, SERVICE),
        locality=args.transfer_locality,
    )
