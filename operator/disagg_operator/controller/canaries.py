"""What the decode pods' transfer canaries say of the path now, in their own words.

I/O layer (aiohttp, a session of its own: the API server's credentials never go to a pod).
A decode pod's readiness latches on its first passing canary (a prefill pool in trouble
must not take decode pods out of service), so readiness says only that the path was proven
once on the pod's engine; each canary's ``GET /verdict`` says whether it passes now and
why (``PrefillBusy: ...``, ``PrefillUnreachable: ...``, ``DecodeRecomputing: ...``,
``SlowTransport: ...``). No sync waits for a pod: the reconciler's canary watch
(:meth:`~disagg_operator.controller.reconciler.Reconciler.watch_canaries_forever`) asks,
every ``--canary-seconds``, at most :data:`MAX_ASKED` canaries per deployment
(:func:`~disagg_operator.planning.transfer_path.to_ask`: the pods not yet proven first, then
the proven ones turn by turn), :data:`CONCURRENCY` at a time over all deployments, each
bounded by :data:`TIMEOUT_S`; it syncs a deployment when a verdict changed (nothing else
would: no pod changes when the path does), and the sync reads the verdicts remembered here
(:meth:`CanaryReader.heard`) into TransferPathReady. The rendered NetworkPolicy admits the
operator's pods to the canary port. A canary that cannot be asked (no pod IP yet, a policy
that blocks it, a timeout) says nothing.
"""

from __future__ import annotations

import asyncio
import datetime
import logging
from collections.abc import Hashable, Mapping, Sequence
from typing import Any

import aiohttp

from disagg_operator.api import CANARY_PORT
from disagg_operator.planning.transfer_path import Said, to_ask, told

log = logging.getLogger("disagg.operator")
TIMEOUT_S = 2.0
MAX_ASKED = 8  # per deployment and sync: the condition lists at most a few pods anyway
CONCURRENCY = 32  # asks in flight over all deployments
TURN_S = 10.0  # a large pool's canaries are asked MAX_ASKED at a time, the next ones each turn


def canary_turn(now: datetime.datetime) -> int:
    """Which turn ``now`` falls in (:func:`~disagg_operator.planning.transfer_path.to_ask`)."""
    return int(now.timestamp() // TURN_S)


class CanaryReader:
    """Asks canaries for their verdicts over HTTP; ``start`` before, ``close`` after."""

    def __init__(self, port: int = CANARY_PORT, timeout_s: float = TIMEOUT_S) -> None:
        self.port, self.timeout_s = port, timeout_s
        self._session: aiohttp.ClientSession | None = None
        self._slots = asyncio.Semaphore(CONCURRENCY)
        # per deployment: pod name -> (its uid, what its canary said last)
        self._heard: dict[Hashable, dict[str, tuple[str, Said]]] = {}

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def verdicts(
        self, pods: Sequence[dict[str, Any]], turn: int = 0, key: Hashable = None
    ) -> Mapping[str, Said]:
        """Pod name → its canary's verdict, for the decode pods :func:`to_ask` picks at
        ``turn`` that answered; remembered under ``key`` for :meth:`heard`."""
        asked = [p for p in to_ask(pods, MAX_ASKED, turn) if p.get("status", {}).get("podIP")]
        answers = await asyncio.gather(*(self._ask(p) for p in asked))
        named = zip(asked, answers, strict=True)
        said = {p["metadata"]["name"]: (_uid(p), a) for p, a in named if a is not None}
        if key is not None:
            self._heard.setdefault(key, {}).update(said)
        return {name: verdict for name, (_, verdict) in said.items()}

    async def changed(self, key: Hashable, pods: Sequence[dict[str, Any]], turn: int) -> bool:
        """Ask (:meth:`verdicts`); whether a canary of deployment ``key`` answered
        differently from what it said last (pass or fail, or the reason the condition
        shows), or for the first time."""
        before = self.heard(key, pods) or {}
        now = await self.verdicts(pods, turn, key)
        return any(n not in before or _moved(before[n], s) for n, s in now.items())

    def heard(self, key: Hashable, pods: Sequence[dict[str, Any]]) -> Mapping[str, Said] | None:
        """What the canaries of ``pods`` said when last asked (a pod re-created under its
        name says nothing yet); None when deployment ``key``'s were never asked."""
        found = self._heard.get(key)
        if found is None:
            return None
        uids = {p["metadata"]["name"]: _uid(p) for p in pods}
        return {n: said for n, (uid, said) in found.items() if uids.get(n) == uid}

    def forget(self, key: Hashable) -> None:
        self._heard.pop(key, None)

    async def _ask(self, pod: dict[str, Any]) -> Said | None:
        assert self._session is not None, "CanaryReader.start() first"
        url = f"http://{pod['status']['podIP']}:{self.port}/verdict"
        try:
            async with self._slots, self._session.get(url) as resp:
                body = await resp.json(content_type=None)
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            log.debug("canary of %s not asked: %s", pod["metadata"]["name"], e)
            return None
        if not isinstance(body, dict) or not isinstance(body.get("reason"), str):
            return None
        return Said(passing=body.get("passing") is True, reason=body["reason"])


def _uid(pod: dict[str, Any]) -> str:
    return str(pod["metadata"].get("uid") or "")


def _moved(before: Said, now: Said) -> bool:
    """A verdict worth a sync: it flipped, or the reason the condition shows changed."""
    return before.passing != now.passing or told(before.reason) != told(now.reason)
