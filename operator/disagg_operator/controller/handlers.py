"""kopf handlers: decorators only; every trigger ends in one level-triggered reconcile.

I/O shell. CR events (new, resumed, or a new ``metadata.generation``) and events of owned
children all call :meth:`Reconciler.request` for the owning deployment
(:mod:`disagg_operator.controller.sync` holds the logic); the same watch streams fill the
kopf indices the :class:`~disagg_operator.controller.rules.cache.Cache` reads. Event and
index handlers only, no create/update/resume or delete handler: those are edge-triggered
and write their diff base and progress on the CR, which a level-triggered reconcile needs
neither of, so kopf never writes to the CR. Details: docs/operator.md (kopf settings).
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

import kopf

from disagg_operator.api import CANARY_PORT, GROUP, PLURAL, VERSION, kinds
from disagg_operator.controller import client as k8s
from disagg_operator.controller import metrics
from disagg_operator.controller.autoscaler import TICK_S, Autoscaler
from disagg_operator.controller.canaries import CanaryReader
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.reconciler import Reconciler
from disagg_operator.controller.rules import cache
from disagg_operator.render.objects import LABEL_DEPLOYMENT

# Not kopf's global registry: tests and `disagg operator` pass this one explicitly.
registry = kopf.OperatorRegistry()
PREFIX = "disagg.dev"
# Watched for events; InferencePools only change with the CR, Secrets are never read.
CHILDREN = tuple((k.api_version, k.plural) for k in kinds.WATCHED)
log = logging.getLogger("disagg.operator")


class NoDiffBase(kopf.DiffBaseStorage):
    """No diff base: only event and index handlers are registered, and nothing reads one.
    kopf still builds one per event of every watched kind (a deep copy of the body, then
    another to clear it): a tenth of a thousand-deployment burst's CPU, spent for nothing."""

    def build(self, *, body: Any, extra_fields: Any = None) -> Any:
        return {}

    def fetch(self, *, body: Any) -> Any:
        return None

    def store(self, *, body: Any, patch: Any, essence: Any) -> None:
        return None


def configure(settings: kopf.OperatorSettings) -> None:
    """kopf settings: events only for warnings (no writes for routine INFO logs), no
    peering objects needed, and children watched through a server-side label selector.
    (kopf keeps no state on the CR: only event handlers are registered.)"""
    settings.posting.level = logging.WARNING
    settings.persistence.diffbase_storage = NoDiffBase()
    settings.peering.standalone = True
    settings.watching.server_timeout = 300
    for version, plural in CHILDREN:  # server-side: never stream unrelated pods to us
        settings.watching.label_selectors[version, plural] = LABEL_DEPLOYMENT
    settings.networking.request_timeout = 60
    # kopf keeps a worker (and the object's last event) per object for this long after its
    # last event; 5 s by default. Our handlers are quick and state lives in the cache, so
    # a shorter wait frees a burst's thousands of workers sooner (memory).
    settings.queueing.idle_timeout = 1.0


DEPLOYMENT_INDEX = "deployments_index"
CHILD_INDICES = tuple(f"{plural}_index" for _, plural in CHILDREN)


def index_deployment(body: Any, namespace: str | None, name: str, **_: Any) -> Any:
    return {(namespace or "", name): cache.project(body)}


def index_child(body: Any, **_: Any) -> Any:
    key = cache.owner(body)
    return None if key is None else {key: cache.project(body)}


kopf.index(GROUP, VERSION, PLURAL, id=DEPLOYMENT_INDEX, registry=registry)(index_deployment)
for (_version, _plural), _id in zip(CHILDREN, CHILD_INDICES, strict=True):
    kopf.index(
        _version, _plural, id=_id, labels={LABEL_DEPLOYMENT: kopf.PRESENT}, registry=registry
    )(index_child)


@kopf.on.startup(registry=registry)
async def startup(settings: kopf.OperatorSettings, memo: kopf.Memo, **kwargs: Any) -> None:
    """Apply the kopf settings and build, from ``memo.config`` (the memo's one key at start:
    :class:`~disagg_operator.controller.config.OperatorConfig`), the API client, the cache,
    the reconciler, the autoscaler and their tasks, each kept on the memo."""
    configure(settings)
    config: OperatorConfig = memo.config
    memo.api = await k8s.Api.connect(config.host)
    memo.cache = cache.Cache(kwargs[DEPLOYMENT_INDEX], [kwargs[i] for i in CHILD_INDICES])
    memo.gauges = metrics.register_deployments(memo.cache)
    if config.root_key is None:
        log.warning(
            "no root key (--root-key-file): handshake keys derive from a random key of this "
            "process; a handshake Secret deleted after a restart comes back with another key"
        )
    memo.canaries = CanaryReader(port=config.canary_port or CANARY_PORT)
    await memo.canaries.start()
    memo.autoscaler = Autoscaler(
        memo.api,
        memo.cache,
        lambda namespace, name: memo.reconciler.request_soon(namespace, name),
        settings=config.settings,
        prometheus_url=config.prometheus_url,
    )
    await memo.autoscaler.start()
    memo.reconciler = Reconciler(
        memo.api, memo.cache, config, canaries=memo.canaries, busy=memo.autoscaler.busy
    )
    if config.resync_seconds:
        resync = memo.reconciler.resync_forever(config.namespaces, config.resync_seconds)
        memo.resync_task = asyncio.create_task(resync)
    if config.canary_seconds:
        watch = memo.reconciler.watch_canaries_forever(config.canary_seconds)
        memo.canary_task = asyncio.create_task(watch)
    tick = config.autoscale_tick
    memo.autoscale_task = asyncio.create_task(memo.autoscaler.run_forever(tick or TICK_S))


@kopf.on.login(registry=registry)
def login(memo: Any, **kwargs: Any) -> kopf.ConnectionInfo | None:
    host = memo.config.host
    if host:  # an explicit unauthenticated server: the emulator
        return kopf.ConnectionInfo(server=host, insecure=True)
    return kopf.login_with_service_account(**kwargs) or kopf.login_with_kubeconfig(**kwargs)


@kopf.on.cleanup(registry=registry)
async def cleanup(memo: kopf.Memo, **_: Any) -> None:
    for task in ("resync_task", "canary_task", "autoscale_task"):
        if memo.get(task):
            memo[task].cancel()
    memo.reconciler.close()
    await memo.autoscaler.close()
    metrics.unregister(memo.gauges)
    await memo.canaries.close()
    await memo.api.close()


@kopf.on.event(GROUP, VERSION, PLURAL, registry=registry)
async def deployment_event(
    type: str, body: Any, namespace: str | None, name: str, memo: Any, **_: Any
) -> None:
    if type == "DELETED":
        memo.reconciler.forget(namespace or "", name)
        memo.autoscaler.forget((namespace or "", name))
    elif memo.reconciler.stale(namespace or "", name, body.get("metadata", {}).get("generation")):
        await memo.reconciler.request_or_retry(namespace or "", name)


async def child_changed(body: Any, namespace: str | None, memo: Any, **_: Any) -> None:
    owner = cache.owner(body)  # a group's pod too: its scheduling shows in the status
    if owner is not None and memo.cache.news(body):  # our own write's echo: already counted
        memo.reconciler.request_soon(namespace or "", owner[1])


for _version, _plural in CHILDREN:
    kopf.on.event(_version, _plural, labels={LABEL_DEPLOYMENT: kopf.PRESENT}, registry=registry)(
        child_changed
    )
