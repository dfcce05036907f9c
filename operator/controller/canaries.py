"""Why a decode pod's transfer canary fails, in the canary's own words.

I/O layer (aiohttp, a session of its own: the API server's credentials never go to a pod).
A pod's readiness says only that its canary fails; the canary's ``GET /ready`` says why
(``DecodeRecomputing: ...`` when the decode computed the prompt instead of reading its KV,
``SlowTransport: ...`` when the KV moved below the bandwidth floor: such a canary passes,
since a slow path still serves). For each running decode pod whose canary is not ready,
and with a floor for the passing ones too (:func:`~disagg_operator.status.transfer_path.
to_ask`), the operator asks it, once per sync, at most :data:`MAX_ASKED` pods, bounded by
:data:`TIMEOUT_S`, and TransferPathReady carries the reason
(:mod:`disagg_operator.status.transfer_path`). The rendered NetworkPolicy admits the
operator's pods to the canary port. A canary that cannot be asked (no pod IP yet, a policy
that blocks it, a timeout) gives no reason: the condition says CanaryFailing.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Mapping, Sequence
from typing import Any

import aiohttp

from disagg_operator.api import CANARY_PORT, DeploymentSpec
from disagg_operator.status.transfer_path import to_ask

log = logging.getLogger("disagg.operator")
TIMEOUT_S = 2.0
MAX_ASKED = 8  # per sync: the condition lists at most a few pods anyway


class CanaryReader:
    """Reads failing canaries' reasons over HTTP; ``start`` before, ``close`` after."""

    def __init__(self, port: int = CANARY_PORT, timeout_s: float = TIMEOUT_S) -> None:
        self.port, self.timeout_s = port, timeout_s
        self._session: aiohttp.ClientSession | None = None

    async def start(self) -> None:
        self._session = aiohttp.ClientSession(timeout=aiohttp.ClientTimeout(total=self.timeout_s))

    async def close(self) -> None:
        if self._session is not None:
            await self._session.close()

    async def reasons(
        self, spec: DeploymentSpec, pods: Sequence[dict[str, Any]]
    ) -> Mapping[str, str]:
        """Pod name → its canary's reason, for the decode pods worth asking (:func:`to_ask`)
        that answered."""
        asked = [p for p in to_ask(spec, pods) if p.get("status", {}).get("podIP")]
        asked = asked[:MAX_ASKED]
        answers = await asyncio.gather(*(self._ask(p) for p in asked))
        named = zip(asked, answers, strict=True)
        return {p["metadata"]["name"]: a for p, a in named if a is not None}

    async def _ask(self, pod: dict[str, Any]) -> str | None:
        assert self._session is not None, "CanaryReader.start() first"
        url = f"http://{pod['status']['podIP']}:{self.port}/ready"
        try:
            async with self._session.get(url) as resp:
                body = await resp.json(content_type=None)
        except (asyncio.TimeoutError, aiohttp.ClientError, ValueError) as e:
            log.debug("canary of %s not asked: %s", pod["metadata"]["name"], e)
            return None
        reason = body.get("reason") if isinstance(body, dict) else None
        return reason if isinstance(reason, str) else None
