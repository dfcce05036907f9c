"""The Reconciler: syncs deployments by (namespace, name), coalesced, retried, resynced.

I/O shell around :func:`disagg_operator.controller.sync.sync`. Every trigger calls
:meth:`Reconciler.request`; requests are serialised per deployment and those that arrive
during a sync collapse into one follow-up sync (:class:`Coalescer`). A sync reads the CR
and its children from the watch-fed :class:`~disagg_operator.controller.rules.cache.Cache`: no GET,
no
LIST. The periodic resync (:meth:`Reconciler.resync_forever`) syncs every cached
deployment, after one listing per child kind that finds objects deleted without an event
(see cache.py): a few LISTs per period for the whole operator, none per deployment.
"""

from __future__ import annotations

import asyncio
import datetime
import fnmatch
import logging
import secrets
import time
from collections.abc import Awaitable, Callable, Coroutine, Hashable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, cast

from disagg_operator.api import kinds
from disagg_operator.controller import metrics
from disagg_operator.controller.canaries import CanaryReader, canary_turn
from disagg_operator.controller.config import OperatorConfig
from disagg_operator.controller.retries import CallLater, Retries
from disagg_operator.controller.rules.cache import Cache
from disagg_operator.controller.rules.refusals import ApiError
from disagg_operator.controller.sync import Client, Heard, sync
from disagg_operator.render.objects import LABEL_DEPLOYMENT

log = logging.getLogger("disagg.operator")
# How long a child event waits for the rest of its burst before its sync (request_soon).
SETTLE_S = 0.05


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


def _utc_now() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.timezone.utc)


@dataclass(frozen=True)
class Clocks:
    """Where a reconciler reads time: ``now`` for a sync's wall clock, ``monotonic`` and
    ``call_later`` for the refused writes' back-off (the running loop's timers when None).
    Tests pass their own to move time by hand."""

    now: Callable[[], datetime.datetime] = _utc_now
    monotonic: Callable[[], float] = time.monotonic
    call_later: CallLater | None = None


class Reconciler:
    """Syncs deployments by (namespace, name), coalesced, timed and counted; refused writes
    are retried after a back-off (:class:`disagg_operator.controller.retries.Retries`).

    ``cache``: where syncs read (handlers.py feeds it from kopf indices); ``config``: the
    operator's configuration (its root key, a random one per process when None; its
    back-off and first retry; the settings it renders with); ``clocks``: see
    :class:`Clocks`; ``canaries``: what the transfer canaries said; ``busy``: requests
    running per pod of a deployment, as the autoscaler last read them (a scale-down takes
    the least busy first).
    """

    def __init__(
        self,
        api: Client,
        cache: Cache,
        config: OperatorConfig,
        *,
        clocks: Clocks = Clocks(),
        canaries: CanaryReader | None = None,
        busy: Callable[[Hashable], Mapping[str, float]] | None = None,
    ) -> None:
        self.api = api
        self.busy = busy
        self.canaries = canaries
        # a root key of its own when the operator has none (keys.py: one per process)
        self.config = replace(config, root_key=config.root_key or secrets.token_bytes(32))
        self.cache = cache
        self._clock = clocks.now
        self._coalescer = Coalescer(self._sync_key)
        self.retries = Retries(
            self._coalescer.request, config.backoff, clocks.monotonic, clocks.call_later
        )
        self._follow_ups: set[asyncio.Task[None]] = set()
        self._synced: dict[Hashable, Any] = {}  # the generation each key's last sync ran on
        self._failures: dict[Hashable, int] = {}
        self._timers: dict[Hashable, asyncio.TimerHandle] = {}
        self._retry_first = config.retry_first  # seconds before a failed sync's first retry
        self._soon: dict[Hashable, asyncio.TimerHandle] = {}

    async def request(self, namespace: str, name: str) -> None:
        await self._coalescer.request((namespace, name))

    def stale(self, namespace: str, name: str, generation: Any) -> bool:
        """Whether a CR event asks for a sync: a deployment not synced yet since this
        process started (new, or in kopf's first listing: a resume), or one whose spec
        changed (a new generation). Status and metadata changes (our own status patch's
        echo among them) do not."""
        key = (namespace, name)
        return key not in self._synced or self._synced[key] != generation

    async def request_or_retry(self, namespace: str, name: str) -> None:
        """:meth:`request`; when the sync fails with a transient error (5xx, a persisting
        429, the API unreachable), try again after ``retry_first`` (5 s) doubling to 5 min,
        until a sync succeeds: nothing else would (kopf does not retry event handlers; the
        resync is minutes away)."""
        key = (namespace, name)
        try:
            await self.request(namespace, name)
        except Exception as e:
            failures = self._failures[key] = self._failures.get(key, 0) + 1
            delay = min(300.0, self._retry_first * 2 ** (failures - 1))
            log.warning("sync of %s/%s failed (retry in %g s): %s", namespace, name, delay, e)
            if key in self._timers:
                self._timers[key].cancel()
            self._later(self._timers, delay, key)
        else:
            self._failures.pop(key, None)

    def request_soon(self, namespace: str, name: str, delay: float = SETTLE_S) -> None:
        """A sync of the deployment ``delay`` s from now, unless one is already due: child
        events come in bursts (both pods of a rollout step turn Ready, a Service and its
        pods change), and one sync after the burst writes one status where a sync per event
        would write one each. Failures are retried like :meth:`request_or_retry`'s."""
        key = (namespace, name)
        if key not in self._soon:
            self._later(self._soon, delay, key)

    def forget(self, namespace: str, name: str) -> None:
        for table in (self._synced, self._failures):
            table.pop((namespace, name), None)
        for timers in (self._timers, self._soon):
            timer = timers.pop((namespace, name), None)
            if timer is not None:
                timer.cancel()
        self._coalescer.forget((namespace, name))
        self.retries.forget((namespace, name))
        self.cache.forget(namespace, name)
        if self.canaries is not None:
            self.canaries.forget((namespace, name))

    def close(self) -> None:
        self.retries.close()
        for timer in [*self._timers.values(), *self._soon.values()]:
            timer.cancel()
        for task in self._follow_ups:
            task.cancel()

    def _follow_up(self, key: Hashable) -> None:
        """Sync ``key`` once more: its last sync's writes made the rollout's next step
        possible. (The watch events of those writes are echoes that handlers.py skips, so
        this is the one sync they would have caused; it reads only the cache.)"""

        async def run() -> None:
            try:
                await self._coalescer.request(key)
            except Exception as e:  # the next event or resync retries
                log.warning("follow-up sync of %s failed: %s", key, e)

        self._spawn(run())

    def _spawn(self, work: Coroutine[Any, Any, None]) -> None:
        """Run ``work`` as a task this reconciler keeps (and cancels on close)."""
        task = asyncio.get_running_loop().create_task(work)
        self._follow_ups.add(task)
        task.add_done_callback(self._follow_ups.discard)

    def _later(
        self, timers: dict[Hashable, asyncio.TimerHandle], delay: float, key: Hashable
    ) -> None:
        """:meth:`request_or_retry` of ``key`` after ``delay`` s, its timer kept in
        ``timers`` until it fires (so :meth:`forget` and :meth:`close` can cancel it)."""

        def fire() -> None:
            timers.pop(key, None)
            namespace, name = cast("tuple[str, str]", key)
            self._spawn(self.request_or_retry(namespace, name))

        timers[key] = asyncio.get_running_loop().call_later(delay, fire)

    async def resync_forever(self, namespaces: Sequence[str], interval: float) -> None:
        """Every ``interval`` s, sync every deployment: the safety net for a missed event.

        Costs one LIST per child kind and scope (:meth:`check_drift`), and writes only
        where something drifted. (kopf timers would do this per CR, but they need a
        finalizer; this loop does not.) ``namespaces``: exact names, or () for all; glob
        patterns are listed cluster-wide and matched here.
        """
        while True:
            await asyncio.sleep(interval)
            await self.resync(namespaces)

    async def watch_canaries_forever(self, interval: float) -> None:
        """Every ``interval`` s, ask the canaries of every cached deployment for their
        verdicts (bounded per deployment: :mod:`~disagg_operator.controller.canaries`) and
        sync the deployments whose canaries changed their word: decode readiness latches, so
        no pod event says when the path breaks or heals."""
        while True:
            await asyncio.sleep(interval)
            await self.watch_canaries()

    async def watch_canaries(self) -> None:
        """One pass of :meth:`watch_canaries_forever`."""
        if self.canaries is None:
            return
        turn = canary_turn(self._clock())
        keys = list(self.cache.deployments())
        found = await asyncio.gather(
            *(self._canaries_changed(key, turn) for key in keys), return_exceptions=True
        )
        for key, changed in zip(keys, found, strict=True):
            if isinstance(changed, BaseException):
                log.warning("canaries of %s/%s not asked: %s", *key, changed)
            elif changed:
                self.request_soon(*key)

    async def _canaries_changed(self, key: tuple[str, str], turn: int) -> bool:
        assert self.canaries is not None
        body = self.cache.deployment(*key)
        if body is None:
            return False
        uid = str(body["metadata"].get("uid") or "")
        pods = [o for o in self.cache.children(*key, uid) if o["kind"] == "Pod"]  # canaries
        return await self.canaries.changed(key, pods, turn)

    async def resync(self, namespaces: Sequence[str]) -> None:
        """One pass: the drift check, then a sync of every cached deployment."""
        await self.check_drift(namespaces)
        for namespace, name in self.cache.deployments():
            try:
                await self.request(namespace, name)
            except Exception as e:  # one broken deployment must not stop the others
                log.warning("resync of %s/%s failed: %s", namespace, name, e)

    async def check_drift(self, namespaces: Sequence[str]) -> None:
        """List every labelled child once and let the cache hide what the API lacks."""
        scopes = [""] if not namespaces or any(_is_glob(n) for n in namespaces) else namespaces
        listed: list[dict[str, Any]] = []
        versions: list[str] = []
        absent: set[str] = set()  # optional kinds this cluster does not serve
        try:
            for scope in scopes:
                for kind in kinds.WATCHED:
                    try:
                        items, at = await self.api.listing(
                            kind.api_version, kind.plural, scope, LABEL_DEPLOYMENT
                        )
                    except ApiError as e:  # a cluster without that CRD has none of them
                        if not (kind.optional and e.status == 404):
                            raise
                        absent.add(kind.kind)
                        continue
                    listed += items
                    versions.append(at)
        except Exception as e:  # keep the loop alive; the next period retries
            log.warning("resync could not list children: %s", e)
            return
        if namespaces:
            listed = [
                o
                for o in listed
                if any(
                    fnmatch.fnmatchcase(o["metadata"].get("namespace", ""), n) for n in namespaces
                )
            ]
        # the oldest listing bounds what "deleted before the listing" can mean
        oldest = min(versions, key=lambda v: int(v) if v.isdigit() else 0, default="")
        lost = self.cache.correct(listed, oldest, kinds.WATCHED_NAMES - absent)
        if lost:
            log.info("resync: %d deployment(s) lost children without an event", len(lost))

    async def _sync_key(self, key: Hashable) -> None:
        namespace, name = cast("tuple[str, str]", key)
        body = self.cache.deployment(namespace, name)
        if body is None or body["metadata"].get("deletionTimestamp"):
            self.retries.forget(key)
            return  # gone or going: owner references let the garbage collector do the rest
        generation = body["metadata"].get("generation")
        holding = self.retries.held(key, generation)
        started = time.monotonic()
        # Marked before the sync: the CR events its own writes cause (status patches) while
        # it runs need no sync of their own; a failed sync takes the mark back.
        self._synced[key] = generation
        try:
            busy = self.busy(key) if self.busy is not None else None
            heard = Heard(self.canaries, busy)
            outcome = await sync(
                self.api,
                self.cache,
                body,
                self.config,
                now=self._clock(),
                held=holding,
                heard=heard,
            )
        except Exception:
            self._synced.pop(key, None)
            metrics.RECONCILES.labels("error").inc()
            metrics.ERRORS.inc()
            raise
        finally:
            metrics.RECONCILE_SECONDS.observe(time.monotonic() - started)
        self.retries.settle(key, generation, outcome.refusals, bool(holding))
        if outcome.more:
            self._follow_up(key)
        result = "invalid" if outcome.problems else "refused" if outcome.refusals else "ok"
        metrics.RECONCILES.labels(result).inc()
        if outcome.actions or outcome.status_written:
            log.info(
                "synced %s/%s: %s",
                namespace,
                name,
                ", ".join(map(str, outcome.actions)) or "status",
            )
