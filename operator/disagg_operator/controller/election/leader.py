"""Leader election: one operator replica reconciles, the others wait as standbys.

I/O shell over the rules of :mod:`disagg_operator.controller.rules.lease` (read them first):
an :class:`Elector` stands by, holds and releases one ``coordination.k8s.io/v1`` Lease
through the operator's API client, and :func:`leading` ties them together for
:func:`disagg_operator.controller.run.running`. A lost lease ends the process rather than
standing by again (as controller-runtime does): kopf's state, watches and the reconciler's
timers would all need a reset, and a fresh process starts clean. docs/operator.md.
"""

from __future__ import annotations

import argparse
import asyncio
import contextlib
import datetime
import logging
import os
import secrets
import socket
import time
from collections.abc import AsyncIterator, Callable

import aiohttp

from disagg_operator.controller import client as k8s
from disagg_operator.controller import metrics
from disagg_operator.controller.rules import lease
from disagg_operator.controller.rules.lease import ElectionSettings, Observation, Record

__all__ = [
    "ElectionSettings",
    "Elector",
    "LeaseLost",
    "add_arguments",
    "identity",
    "leading",
    "settings_from",
]

log = logging.getLogger("disagg.leader")
FAILURES = (k8s.ApiError, aiohttp.ClientError, asyncio.TimeoutError, OSError)
PLURAL = "leases"


class LeaseLost(RuntimeError):
    """This process no longer holds the Lease: it must stop reconciling at once."""


def identity(base: str | None = None) -> str:
    """``<pod name or host name>_<random>``: unique per process, as controller-runtime makes
    it, so a restarted pod is a new candidate, never mistaken for the holder it replaced."""
    name = base or os.environ.get("POD_NAME") or socket.gethostname()
    return f"{name}_{secrets.token_hex(4)}"


def _utcnow() -> datetime.datetime:
    return datetime.datetime.now(tz=datetime.timezone.utc)


class Elector:
    """One candidate for one Lease. ``clock`` (monotonic) and ``wall`` are injectable."""

    def __init__(
        self,
        api: k8s.Api,
        settings: ElectionSettings,
        me: str,
        *,
        clock: Callable[[], float] = time.monotonic,
        wall: Callable[[], datetime.datetime] = _utcnow,
    ) -> None:
        self.api, self.settings, self.me = api, settings, me
        self.clock, self.wall = clock, wall
        self.seen: Observation | None = None
        self.state = "starting"  # starting, standby, leading, lost, released
        self._version = ""  # resourceVersion of the Lease as last read or written
        self.stopping = False  # set to end :meth:`hold` at its next turn

    @classmethod
    async def connect(
        cls, host: str | None, settings: ElectionSettings, me: str | None = None
    ) -> Elector:
        """An elector with its own API client (``host``: an explicit server, e.g. the emulator)."""
        return cls(await k8s.Api.connect(host), settings, me or identity())

    async def close(self) -> None:
        await self.api.close()

    @property
    def leading(self) -> bool:
        return self.state == "leading"

    def _say(self, state: str, detail: str = "") -> None:
        """Log each change of state once (not each retry)."""
        if state != self.state:
            self.state = state
            metrics.LEADER.set(1 if state == "leading" else 0)
            where = f"{self.settings.namespace}/{self.settings.name}"
            level = logging.ERROR if state == "lost" else logging.INFO
            log.log(level, "%s (lease %s, identity %s)%s", state, where, self.me, detail)

    async def _read(self) -> Record | None:
        s = self.settings
        body = await self.api.get(lease.API_VERSION, PLURAL, s.namespace, s.name)
        if body is None:
            self.seen, self._version = None, ""
            return None
        self._version = str(body["metadata"].get("resourceVersion", ""))
        record = lease.read(body)
        self.seen = lease.observe(self.seen, record, self.clock())
        return record

    async def try_acquire_or_renew(self) -> bool:
        """One attempt: read the Lease, and write it if the rules allow. True: we hold it."""
        current = await self._read()
        now = self.clock()
        if not lease.may_write(self.seen, self.me, now):  # seen is None when it is absent
            return False
        s = self.settings
        record = lease.claim(current, self.me, s.lease_duration_s, lease.micro_time(self.wall()))
        body = lease.lease_body(s.name, s.namespace, record, self._version)
        try:
            exists = current is not None
            written = await (self.api.replace(body) if exists else self.api.create(body))
        except k8s.ApiError as e:
            if e.status == 409:  # another candidate wrote first: it won this round
                return False
            raise
        if written is None:  # created by someone else meanwhile, or deleted: look again
            return False
        self._version = str(written["metadata"].get("resourceVersion", ""))
        self.seen = Observation(lease.read(written), now)
        return True

    def _pause(self) -> float:
        """A retry period, or less when the observed lease runs out before that."""
        retry = self.settings.retry_period_s
        if self.seen is None or not self.seen.record.holder:
            return retry
        left = lease.expires_at(self.seen) - self.clock()
        return max(0.01, min(retry, left + 0.01))

    async def acquire(self) -> None:
        """Stand by until this candidate holds the Lease: try every retry period, or sooner
        when the observed lease runs out first. API errors and timeouts meanwhile are logged
        at debug and retried (the API server may be restarting)."""
        self._say("standby")
        while True:
            try:
                if await self.try_acquire_or_renew():
                    self._say("leading")
                    return
            except FAILURES as e:
                log.debug("lease attempt failed, retrying: %s", e)
            await asyncio.sleep(self._pause())

    async def hold(self) -> None:
        """Renew every retry period until the lease is lost: no renewal succeeded for the
        renew deadline (API errors and timeouts count towards it), or another holder is
        seen; then raise :class:`LeaseLost`. Returns only once :attr:`stopping` is set."""
        s = self.settings
        renewed = self.clock()  # when the last successful renewal was sent
        while not self.stopping:
            await asyncio.sleep(s.retry_period_s)
            sent = self.clock()
            failure = await self._attempt(s.renew_deadline_s - (sent - renewed))
            if not failure:
                renewed = sent
                continue
            holder = self.seen.record.holder if self.seen else ""
            if holder and holder != self.me:
                self._lost(f"{holder} holds it")
            if self.clock() - renewed >= s.renew_deadline_s:
                self._lost(f"no renewal for {s.renew_deadline_s:g} s (last: {failure})")

    async def _attempt(self, limit: float) -> str:
        """One renewal, given ``limit`` seconds: "" when it succeeded, else why not."""
        if limit <= 0:
            return "the renew deadline passed"
        try:
            ok = await asyncio.wait_for(self.try_acquire_or_renew(), limit)
        except asyncio.TimeoutError:
            return f"no answer within {limit:.1f} s"
        except FAILURES as e:
            return str(e) or type(e).__name__
        return "" if ok else "another write came first"

    def _lost(self, why: str) -> None:
        self._say("lost", f": {why}; stopping")
        raise LeaseLost(why)

    async def release(self) -> None:
        """Hand the lease back if we hold it; a failure only costs the standby the expiry."""
        if not self.leading or self.seen is None:
            return
        s = self.settings
        record = lease.released(self.seen.record, lease.micro_time(self.wall()))
        try:
            await self.api.replace(lease.lease_body(s.name, s.namespace, record, self._version))
        except FAILURES as e:
            log.warning("could not release the lease (a standby takes over on expiry): %s", e)
        self._say("released")


@contextlib.asynccontextmanager
async def leading(elector: Elector) -> AsyncIterator[asyncio.Task[None]]:
    """Return once ``elector`` leads; yield its renewal task (ends with :class:`LeaseLost`).

    On exit the renewal stops and the lease is released if still held. The renewal stops
    on :attr:`Elector.stopping` as well as on the cancel, which a renewal can lose (Python
    3.11's ``wait_for`` returns a call that finished as the cancel came)."""
    await elector.acquire()
    renewing = asyncio.create_task(elector.hold(), name="lease renewal")
    try:
        yield renewing
    finally:
        elector.stopping = True
        renewing.cancel()
        with contextlib.suppress(asyncio.CancelledError, LeaseLost):
            await renewing
        await elector.release()


def add_arguments(p: argparse.ArgumentParser) -> None:
    """``disagg operator``'s leader-election flags."""
    d = ElectionSettings()
    p.add_argument(
        "--leader-elect",
        action=argparse.BooleanOptionalAction,
        default=False,
        help="run as one of several replicas: reconcile only while holding the Lease "
        "(the chart turns it on)",
    )
    p.add_argument("--lease-name", default=d.name, help="name of the Lease")
    p.add_argument(
        "--lease-namespace",
        default=os.environ.get("POD_NAMESPACE", ""),
        help="namespace of the Lease (default $POD_NAMESPACE)",
    )
    p.add_argument(
        "--lease-duration-seconds",
        type=int,
        default=d.lease_duration_s,
        help="how long a standby waits after the last renewal it saw",
    )
    p.add_argument(
        "--renew-deadline-seconds",
        type=float,
        default=d.renew_deadline_s,
        help="the leader stops when it could not renew for this long",
    )
    p.add_argument(
        "--retry-period-seconds",
        type=float,
        default=d.retry_period_s,
        help="how often the leader renews and standbys look",
    )


def settings_from(args: argparse.Namespace) -> ElectionSettings | None:
    """The election settings the flags ask for; None without ``--leader-elect``."""
    if not args.leader_elect:
        return None
    return ElectionSettings(
        name=args.lease_name,
        namespace=args.lease_namespace,
        lease_duration_s=args.lease_duration_seconds,
        renew_deadline_s=args.renew_deadline_seconds,
        retry_period_s=args.retry_period_seconds,
    )
