"""Reconcile one DisaggregatedDeployment: read observed → render desired → plan → execute.

I/O shell around the pure core (render, plan, status), in the sample-controller shape. The
API client is passed in (:class:`disagg_operator.k8s.Api` or a test double with the same
methods); this module imports no kopf or HTTP library.

One path for every trigger: kopf's create/update/resume handlers and child events all call
:meth:`Reconciler.request`, which serialises syncs per deployment and collapses requests
that arrive during a sync into one follow-up sync (a burst of pod events costs one extra
sync, not one each).

Events: one Normal ``Reconciled`` event per sync whose writes were accepted (listing them),
one Warning ``InvalidSpec`` when the problems of a spec change, one Warning ``ApiRefused``
per new answer of the API server to refused writes; none otherwise.

Error policy: an invalid spec is not an error: it is reported (status Ready=False reason
InvalidSpec, and the Warning event) and nothing is created or changed.
A refused write (:mod:`disagg_operator.refusals`: a 4xx such as 422 Invalid or a quota's
403) does not stop the sync: every other action still runs (accepted writes stay, as
Kubernetes applies objects one by one), the status says Degraded/ApiRefused, and the
:class:`Reconciler` retries after a back-off (5 s doubling to 5 min) on its own timer.
Until then, syncs brought by other triggers (child events, resync) hold the refused
objects' writes, so the events of the accepted writes cannot drive a hot loop of refused
ones; a new spec generation ends the back-off at once.
Transient API failures (5xx, 401/408/429, connection errors) propagate, so kopf retries
create/update/resume; for child events the next event or the periodic resync retries.
"""

from __future__ import annotations

import asyncio
import datetime
import fnmatch
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Hashable, Sequence
from dataclasses import dataclass, field
from typing import Any, Protocol, cast

from disagg_operator import keys, metrics
from disagg_operator import status as status_mod
from disagg_operator.models import API_VERSION, INFERENCE_POOL_APIS, PLURAL, DisaggregatedDeployment
from disagg_operator.plan import Action, plan
from disagg_operator.refusals import ApiError, Backoff, Refusal, api_message, is_refusal, lines
from disagg_operator.render.objects import LABEL_DEPLOYMENT, render_model, role_pod
from disagg_operator.retries import Retries
from disagg_operator.rollout.decide import decide, routed_revision
from disagg_operator.rollout.planner import Plan
from disagg_operator.validation import Problem, parse

log = logging.getLogger("disagg.operator")

# (apiVersion, plural) of every kind a deployment always may own and the operator reads.
# Not Secrets: the handshake Secret is created, never read back (see keys.py), so the
# operator needs no get/list/watch on Secrets.
CHILD_KINDS: tuple[tuple[str, str], ...] = (
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

    actions: list[Action] = field(default_factory=list)  # attempted (held ones excluded)
    problems: list[Problem] = field(default_factory=list)
    done: list[Action] = field(default_factory=list)  # accepted and changed something
    refusals: list[Refusal] = field(default_factory=list)  # refused now, or held
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


async def execute(api: Client, actions: list[Action]) -> tuple[list[Action], list[Refusal]]:
    """Apply actions concurrently: writes first, then deletes (a replace is delete+create).

    Every action runs. Returns the actions that changed something (a create answered 409
    AlreadyExists did not) and the refused ones (see the module docstring); any other
    failure propagates."""

    async def one(action: Action) -> Action | Refusal | None:
        created = None
        try:
            if action.verb in {"delete", "replace"}:
                await api.delete(action.api_version, action.kind, action.namespace, action.name)
            if action.verb in {"create", "replace"}:
                created = await api.create(action.body)
            if action.verb == "patch":
                await api.patch(
                    action.api_version, action.kind, action.namespace, action.name, action.body
                )
        except ApiError as e:
            if not is_refusal(e.status):
                raise
            reason, message = api_message(e.text)
            return Refusal(action.verb, action.kind, action.name, e.status, reason, message)
        return None if action.verb == "create" and created is None else action

    writes = await asyncio.gather(*(one(a) for a in actions if a.verb != "delete"))
    deletes = await asyncio.gather(*(one(a) for a in actions if a.verb == "delete"))
    results = [*writes, *deletes]
    return (
        [r for r in results if isinstance(r, Action)],
        [r for r in results if isinstance(r, Refusal)],
    )


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
    root_key: bytes,
    held: Sequence[Refusal] = (),
) -> Outcome:
    """One level-triggered pass over deployment ``body``.

    ``root_key``: the operator's root key (the handshake key is derived from it, see
    keys.py); ``held``: writes refused by an earlier sync whose back-off has not ended:
    writes to those objects are not attempted and, while still planned, still reported."""
    observed = await observe(api, body)
    dd, problems = parse(body)
    outcome = Outcome(problems=problems)
    meta = body["metadata"]
    uid = str(meta.get("uid") or "")
    pods = [o for o in observed if o["kind"] == "Pod"]
    steps: Plan | None = None
    if dd is not None and not problems:
        steps = decide(dd, uid=uid, pods=pods, routed=routed_revision(meta["name"], observed))
        key = keys.derive(root_key, meta["namespace"], meta["name"], uid)
        rendered = render_model(dd, uid=uid, hmac_key=key, routed_kv=steps.routed)
        desired = [o for o in rendered if o["kind"] != "Pod"]
        actions = plan(keys.without_secrets(desired), [o for o in observed if o["kind"] != "Pod"])
        await _apply(api, body, desired, actions + pod_actions(dd, uid, steps), held, outcome)
    if steps is not None and dd is not None and outcome.done:  # count what is there now
        selector = f"{LABEL_DEPLOYMENT}={meta['name']}"
        listed = await api.list("v1", "pods", meta["namespace"], selector)
        pods = [p for p in listed if _owned(p, uid)]
        steps = decide(dd, uid=uid, pods=pods, routed=steps.routed)
    status = status_mod.compute(
        name=body["metadata"]["name"],
        spec=dd.spec if dd is not None else None,
        generation=meta.get("generation"),
        pods=pods,
        previous=body.get("status"),
        now=now,
        problems=problems,
        rollout=steps,
        refusals=outcome.refusals,
    )
    outcome.status_written = await _write_status(api, body, status, outcome)
    return outcome


def pod_actions(dd: DisaggregatedDeployment, uid: str, steps: Plan) -> list[Action]:
    """The rollout plan's pod writes: creates in role order, then deletes."""
    namespace = dd.metadata.namespace
    actions = [
        Action("create", "Pod", pod["metadata"]["name"], namespace, "v1", pod)
        for role, indices in steps.create.items()
        for pod in (role_pod(dd, uid=uid, role=role, index=i) for i in indices)
    ]
    actions += [Action("delete", "Pod", name, namespace, "v1") for name in steps.delete]
    return actions


async def _apply(
    api: Client,
    body: dict[str, Any],
    desired: list[dict[str, Any]],
    actions: list[Action],
    held: Sequence[Refusal],
    outcome: Outcome,
) -> None:
    """Execute the planned ``actions`` but those to ``held`` objects, with the Secret's
    create when pods are created (keys.writes); fill in ``outcome``."""
    holding = {(r.kind, r.name) for r in held}
    planned = {(a.kind, a.name) for a in actions}
    todo = [a for a in actions if (a.kind, a.name) not in holding]
    outcome.actions = keys.writes(desired, todo)
    outcome.done, refused = await execute(api, outcome.actions)
    outcome.refusals = [r for r in held if (r.kind, r.name) in planned] + refused
    if outcome.done:  # what `kubectl describe` shows: one Normal event per change
        summary = ", ".join(map(str, outcome.done))
        await api.event(body, type_="Normal", reason="Reconciled", message=summary)


async def _write_status(
    api: Client, body: dict[str, Any], status: dict[str, Any], outcome: Outcome
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
    if outcome.problems and _messages(previous, "InvalidSpec") != _messages(status, "InvalidSpec"):
        text = "; ".join(str(p) for p in outcome.problems)
        await api.event(body, type_="Warning", reason="InvalidSpec", message=text)
    told = " ".join(_messages(previous, "ApiRefused"))
    for line in lines(outcome.refusals):  # once per answer: the stored status remembers it
        if line not in told:
            await api.event(body, type_="Warning", reason="ApiRefused", message=line)
    return True


def _messages(status: dict[str, Any] | None, reason: str) -> list[str]:
    conditions = (status or {}).get("conditions") or []
    return [c.get("message", "") for c in conditions if c.get("reason") == reason]


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
    """Syncs deployments by (namespace, name), coalesced, timed and counted; refused writes
    are retried after a back-off (:class:`disagg_operator.retries.Retries`).

    ``root_key``: the operator's root key (keys.py); a random one per process when None.
    """

    def __init__(
        self,
        api: Client,
        clock: Callable[[], datetime.datetime] | None = None,
        *,
        root_key: bytes | None = None,
        backoff: Backoff | None = None,
    ) -> None:
        self.api = api
        self.root_key = root_key or secrets.token_bytes(32)
        self._clock = clock or (lambda: datetime.datetime.now(tz=datetime.timezone.utc))
        self._coalescer = Coalescer(self._sync_key)
        self.retries = Retries(self._coalescer.request, backoff)

    async def request(self, namespace: str, name: str) -> None:
        await self._coalescer.request((namespace, name))

    def forget(self, namespace: str, name: str) -> None:
        self._coalescer.forget((namespace, name))
        self.retries.forget((namespace, name))

    def close(self) -> None:
        self.retries.close()

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
            self.retries.forget(key)
            return  # gone or going: owner references let the garbage collector do the rest
        generation = body["metadata"].get("generation")
        holding = self.retries.held(key, generation)
        started = time.monotonic()
        try:
            outcome = await sync(
                self.api, body, now=self._clock(), root_key=self.root_key, held=holding
            )
        except Exception:
            metrics.RECONCILES.labels("error").inc()
            metrics.ERRORS.inc()
            raise
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        self.retries.settle(key, generation, outcome.refusals, bool(holding))
        result = "invalid" if outcome.problems else "refused" if outcome.refusals else "ok"
        metrics.RECONCILES.labels(result).inc()
        if outcome.actions or outcome.status_written:
            log.info(
                "synced %s/%s: %s",
                namespace,
                name,
                ", ".join(map(str, outcome.actions)) or "status",
            )
