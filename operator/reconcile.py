"""Reconcile one DisaggregatedDeployment: read observed → render desired → plan → execute.

I/O shell around the pure core (render, plan, status), in the sample-controller shape. The
API client is passed in (:class:`disagg_operator.k8s.Api` or a test double with the same
methods); this module imports no kopf or HTTP library.

One path for every trigger: kopf's create/update/resume handlers and child events all call
:meth:`Reconciler.request`, which serialises syncs per deployment and collapses requests
that arrive during a sync into one follow-up sync (a burst of pod events costs one extra
sync, not one each).

Events: one Normal ``Reconciled`` event per sync that changed children (listing the
actions), one Warning ``InvalidSpec`` when the problems of a spec change; none otherwise.

Error policy: an invalid spec is not an error: it is reported (status Ready=False reason
InvalidSpec, and the Warning event) and nothing is created or changed.
API failures propagate, so kopf retries create/update/resume with backoff; for child events
the next event or the periodic resume retries.
"""

from __future__ import annotations

import asyncio
import base64
import binascii
import datetime
import fnmatch
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from disagg_operator import metrics
from disagg_operator import status as status_mod
from disagg_operator.models import API_VERSION, INFERENCE_POOL_APIS, PLURAL
from disagg_operator.plan import Action, plan
from disagg_operator.render.derive import HMAC_KEY
from disagg_operator.render.objects import LABEL_DEPLOYMENT, render
from disagg_operator.validation import Problem, parse

log = logging.getLogger("disagg.operator")

# (apiVersion, plural) of every kind a deployment always may own.
CHILD_KINDS: tuple[tuple[str, str], ...] = (
    ("v1", "secrets"),
    ("v1", "services"),
    ("networking.k8s.io/v1", "networkpolicies"),
    ("policy/v1", "poddisruptionbudgets"),
    ("v1", "pods"),
)
# Owned only with llm-d: looked at only when the spec has an ``llmd`` section, so clusters
# without the Inference Extension (and charts without its RBAC) see no calls for it, and
# only in the API version the spec renders (``llmd.inferencePool.version``), so the chart
# grants one API group. Removing the whole section, or switching the version, leaves the
# old pool behind until the deployment is deleted; setting ``llmd.enabled: false`` (or
# ``inferencePool.enabled: false``) removes it.
POOL_PLURAL = "inferencepools"


def optional_kinds(spec: dict[str, Any]) -> tuple[tuple[str, str], ...]:
    """(apiVersion, plural) of the llm-d kinds a raw spec may own (none without ``llmd``)."""
    llmd = spec.get("llmd")
    if not llmd:
        return ()
    version = (llmd.get("inferencePool") or {}).get("version", "v1")
    api = INFERENCE_POOL_APIS.get(version)
    return ((api, POOL_PLURAL),) if api else ()  # unknown: invalid spec, nothing is written


class Client(Protocol):
    """What reconcile needs from the API client (see :class:`disagg_operator.k8s.Api`)."""

    async def get(self, api_version: str, plural: str, namespace: str, name: str) -> Any: ...
    async def list(
        self, api_version: str, plural: str, namespace: str, label_selector: str = ""
    ) -> list[dict[str, Any]]: ...
    async def create(self, obj: Any) -> Any: ...
    async def patch(
        self,
        api_version: str,
        kind: str,
        namespace: str,
        name: str,
        patch: Any,
        *,
        subresource: str = "",
    ) -> Any: ...
    async def delete(self, api_version: str, kind: str, namespace: str, name: str) -> None: ...
    async def event(self, involved: Any, *, type_: str, reason: str, message: str) -> None: ...


@dataclass
class Outcome:
    """What one sync did (for logs, metrics and tests)."""

    actions: list[Action] = field(default_factory=list)
    problems: list[Problem] = field(default_factory=list)
    status_written: bool = False


def _owned(obj: dict[str, Any], uid: str) -> bool:
    return any(ref.get("uid") == uid for ref in obj["metadata"].get("ownerReferences", []))


async def observe(api: Client, body: dict[str, Any]) -> list[dict[str, Any]]:
    """The children this deployment owns now (by label, then by owner uid)."""
    meta = body["metadata"]
    selector = f"{LABEL_DEPLOYMENT}={meta['name']}"
    kinds = CHILD_KINDS + optional_kinds(body.get("spec") or {})
    lists = await asyncio.gather(*(api.list(v, p, meta["namespace"], selector) for v, p in kinds))
    return [obj for items in lists for obj in items if _owned(obj, meta.get("uid", ""))]


def existing_key(observed: list[dict[str, Any]]) -> str | None:
    """The handshake key of the deployment's Secret, if there is one."""
    for obj in observed:
        if obj["kind"] == "Secret" and HMAC_KEY in obj.get("data", {}):
            try:
                return base64.b64decode(obj["data"][HMAC_KEY]).decode()
            except (binascii.Error, UnicodeDecodeError):
                return None  # unreadable: render a fresh one; plan never rewrites Secret data
    return None


async def execute(api: Client, actions: list[Action]) -> None:
    """Apply actions concurrently: writes first, then deletes (a replace is delete+create)."""

    async def one(action: Action) -> None:
        if action.verb in {"delete", "replace"}:
            await api.delete(action.api_version, action.kind, action.namespace, action.name)
        if action.verb in {"create", "replace"}:
            await api.create(action.body)
        if action.verb == "patch":
            await api.patch(
                action.api_version, action.kind, action.namespace, action.name, action.body
            )

    await asyncio.gather(*(one(a) for a in actions if a.verb != "delete"))
    await asyncio.gather(*(one(a) for a in actions if a.verb == "delete"))


def status_patch(old: dict[str, Any] | None, new: dict[str, Any]) -> dict[str, Any]:
    """Merge patch from ``old`` status to ``new`` status; {} when they are equal."""
    old = old or {}
    if old == new:
        return {}
    return {**{k: None for k in old if k not in new}, **new}


async def sync(
    api: Client,
    body: dict[str, Any],
    *,
    now: datetime.datetime,
    new_key: Callable[[], str] = lambda: secrets.token_hex(32),
) -> Outcome:
    """One level-triggered pass over deployment ``body``."""
    observed = await observe(api, body)
    dd, problems = parse(body)
    outcome = Outcome(problems=problems)
    desired: list[dict[str, Any]] = []
    if dd is not None and not problems:
        desired = render(body, hmac_key=existing_key(observed) or new_key())
        outcome.actions = plan(desired, observed)
        await execute(api, outcome.actions)
        if outcome.actions:  # what `kubectl describe` shows: one Normal event per change
            summary = ", ".join(map(str, outcome.actions))
            await api.event(body, type_="Normal", reason="Reconciled", message=summary)
    pods = [o for o in observed if o["kind"] == "Pod"]
    if outcome.actions:  # pods changed: count what is there now
        meta = body["metadata"]
        selector = f"{LABEL_DEPLOYMENT}={meta['name']}"
        pods = [
            p
            for p in await api.list("v1", "pods", meta["namespace"], selector)
            if _owned(p, meta.get("uid", ""))
        ]
    status = status_mod.compute(
        name=body["metadata"]["name"],
        spec=dd.spec if dd is not None else None,
        generation=body["metadata"].get("generation"),
        pods=pods,
        previous=body.get("status"),
        now=now,
        problems=problems,
        desired_pods=[o for o in desired if o["kind"] == "Pod"],
    )
    outcome.status_written = await _write_status(api, body, status, problems)
    return outcome


async def _write_status(
    api: Client, body: dict[str, Any], status: dict[str, Any], problems: list[Problem]
) -> bool:
    previous = body.get("status")
    patch = status_patch(previous, status)
    if not patch:
        return False
    meta = body["metadata"]
    await api.patch(
        API_VERSION,
        body["kind"],
        meta["namespace"],
        meta["name"],
        {"status": patch},
        subresource="status",
    )
    if problems and _messages(previous) != _messages(status):
        text = "; ".join(str(p) for p in problems)
        await api.event(body, type_="Warning", reason="InvalidSpec", message=text)
    return True


def _messages(status: dict[str, Any] | None) -> list[str]:
    conditions = (status or {}).get("conditions") or []
    return [c.get("message", "") for c in conditions if c.get("reason") == "InvalidSpec"]


class Coalescer:
    """One run at a time per key; requests made during a run collapse into one rerun."""

    def __init__(self, run: Callable[[Hashable], Awaitable[None]]) -> None:
        self._run = run
        self._locks: dict[Hashable, asyncio.Lock] = {}
        self._asked: dict[Hashable, int] = {}
        self._covered: dict[Hashable, int] = {}

    async def request(self, key: Hashable) -> None:
        """Return once a run that started after this call has finished (or raise its error)."""
        ticket = self._asked[key] = self._asked.get(key, 0) + 1
        lock = self._locks.setdefault(key, asyncio.Lock())
        async with lock:
            if self._covered.get(key, 0) >= ticket:
                return  # a run that began after our request already covered it
            self._covered[key] = self._asked[key]
            await self._run(key)

    def forget(self, key: Hashable) -> None:
        for table in (self._locks, self._asked, self._covered):
            table.pop(key, None)


def _is_glob(pattern: str) -> bool:
    return any(ch in pattern for ch in "*?[")


class Reconciler:
    """Syncs deployments by (namespace, name), coalesced, timed and counted."""

    def __init__(self, api: Client, clock: Callable[[], datetime.datetime] | None = None) -> None:
        self.api = api
        self._clock = clock or (lambda: datetime.datetime.now(tz=datetime.timezone.utc))
        self._coalescer = Coalescer(self._sync_key)

    async def request(self, namespace: str, name: str) -> None:
        await self._coalescer.request((namespace, name))

    def forget(self, namespace: str, name: str) -> None:
        self._coalescer.forget((namespace, name))

    async def resync_forever(self, namespaces: Sequence[str], interval: float) -> None:
        """Every ``interval`` s, sync every deployment: the safety net for a missed event.

        Costs reads only when nothing changed. (kopf timers would do this per CR, but they
        need a finalizer; this loop does not.) ``namespaces``: exact names, or () for all;
        glob patterns are listed cluster-wide and matched here.
        """
        while True:
            await asyncio.sleep(interval)
            scopes = [""] if not namespaces or any(_is_glob(n) for n in namespaces) else namespaces
            for scope in scopes:
                try:
                    bodies = await self.api.list(API_VERSION, PLURAL, scope)
                except Exception as e:  # keep the loop alive; the next period retries
                    log.warning("resync could not list deployments: %s", e)
                    continue
                for body in bodies:
                    meta = body["metadata"]
                    if namespaces and not any(
                        fnmatch.fnmatchcase(meta["namespace"], n) for n in namespaces
                    ):
                        continue
                    try:
                        await self.request(meta["namespace"], meta["name"])
                    except Exception as e:  # one broken deployment must not stop the others
                        log.warning(
                            "resync of %s/%s failed: %s", meta["namespace"], meta["name"], e
                        )

    async def _sync_key(self, key: Hashable) -> None:
        namespace, name = cast("tuple[str, str]", key)
        body = await self.api.get(API_VERSION, PLURAL, namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            return  # gone or going: owner references let the garbage collector do the rest
        started = time.monotonic()
        try:
            outcome = await sync(self.api, body, now=self._clock())
        except Exception:
            metrics.RECONCILES.labels("error").inc()
            metrics.ERRORS.inc()
            raise
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        metrics.RECONCILES.labels("invalid" if outcome.problems else "ok").inc()
        if outcome.actions or outcome.status_written:
            log.info(
                "synced %s/%s: %s",
                namespace,
                name,
                ", ".join(map(str, outcome.actions)) or "status",
            )
