"""The operator's configuration: one frozen value, built once at start and passed whole.

Controller layer, a plain value (sample-controller's ``Controller`` struct): ``disagg
operator`` builds it from its flags (:func:`from_args`), tests and benchmarks build it
directly; :func:`~disagg_operator.controller.run.running` puts it in kopf's memo as its
one key, and the handlers and the :class:`~disagg_operator.controller.reconciler.Reconciler`
read their settings from it, never from loose keywords.
"""

from __future__ import annotations

import argparse
from collections.abc import Sequence
from dataclasses import dataclass

from disagg_operator.controller.rules.refusals import Backoff
from disagg_operator.engines.settings import DEFAULT, Settings


@dataclass(frozen=True)
class OperatorConfig:
    """What one operator process runs with.

    ``host``: an explicit unauthenticated API server (the emulator; None: the service
    account or kubeconfig); ``namespaces``: those watched (globs allowed; (): every one);
    ``liveness_endpoint``: kopf's own liveness URL (None: none); ``resync_seconds``: the
    periodic resync (0: only on events); ``canary_seconds``: the canary watch (0: only on
    syncs); ``canary_port``: where canaries are asked (None: the API's ``CANARY_PORT``);
    ``ready_timeout``: seconds kopf has to become ready; ``root_key``: the root of the
    handshake keys (None: a random one per process); ``backoff``: of refused writes
    (None: 5 s doubling to 5 min); ``retry_first``: seconds before the first retry of a
    failed sync; ``settings``: engines, platforms and canary image; ``prometheus_url``:
    the autoscaler's Prometheus where a spec names none; ``autoscale_tick``: how often the
    autoscaler looks for a deployment whose period came (None: its default).
    """

    host: str | None = None
    namespaces: tuple[str, ...] = ()
    liveness_endpoint: str | None = None
    resync_seconds: float = 0.0
    canary_seconds: float = 0.0
    canary_port: int | None = None
    ready_timeout: float = 30.0
    root_key: bytes | None = None
    backoff: Backoff | None = None
    retry_first: float = 5.0
    settings: Settings = DEFAULT
    prometheus_url: str | None = None
    autoscale_tick: float | None = None


def from_args(
    args: argparse.Namespace, *, settings: Settings, root_key: bytes | None
) -> OperatorConfig:
    """The configuration ``disagg operator``'s parsed flags ask for; ``settings`` and
    ``root_key`` are what the flags' files held (read and checked by the caller)."""
    namespaces: Sequence[str] = () if args.all_namespaces else args.namespace
    return OperatorConfig(
        namespaces=tuple(namespaces),
        resync_seconds=args.resync_seconds,
        canary_seconds=args.canary_seconds,
        root_key=root_key,
        settings=settings,
        prometheus_url=args.prometheus_url,
    )
