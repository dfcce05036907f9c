"""The proxy's upstream side: the workers of each role, the policy that picks one, the
next worker that takes a request when one is full or down, and what a failed hop answers.

I/O-free layer (aiohttp only for its exception types): :mod:`serve.proxy.flow` does the HTTP.
A hop whose worker answers 503 (full) or cannot be reached is *retryable*: the request is
tried once on each other worker of the pool; the last failure is what the client gets. A
worker's 4xx, 503 and 504 keep their status; any other worker failure is a 502. Each pool
counts its hops in and out (:class:`~.rules.shedding.Drain`), which is what the proxy
sheds by (:meth:`Pool.shed`).
"""

from __future__ import annotations

import asyncio
import itertools
import time
from collections.abc import Awaitable, Callable, Collection, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

import aiohttp

from disagg_worker.serve.proxy.rules.shedding import Drain, Shed
from disagg_worker.serve.rules.limits import PARAM_CHARS, bounded
from disagg_worker.serve.rules.openai import TRANSFER_FAILED

POLICIES = ("least-loaded", "round-robin")
T = TypeVar("T")
# a hop's candidates as the pool orders them → those it may use, best first (transfer
# locality: docs/routing.md); raises the HopError that says why when none may
Within = Callable[[list["Backend"]], list["Backend"]]


def hop_failure(
    where: str, timeout_s: float, error: Exception, stateless: bool = False
) -> HopError:
    """What the proxy answers when a hop's HTTP call fails: 504 for the deadline, 502 for
    a worker that cannot be reached or answers something that is not JSON. A worker that
    dropped the connection mid-request (it died) may be retried elsewhere only for a
    ``stateless`` hop (a prefill's: what it held died with it, nothing reached the
    client)."""
    if isinstance(error, asyncio.TimeoutError):
        return HopError(504, f"{where}: no answer within the {timeout_s:g}s deadline")
    if isinstance(error, aiohttp.ClientConnectorError):
        cause = f"{where}: cannot connect ({error.os_error or error})"
        return HopError(502, cause, retryable=True)
    dropped = isinstance(error, (aiohttp.ServerDisconnectedError, aiohttp.ClientOSError))
    return HopError(
        502, f"{where}: {type(error).__name__}: {error}", retryable=stateless and dropped
    )


class HopError(Exception):
    """A hop failed; ``status`` is what the proxy answers. ``retryable``: another worker
    of the pool may take it (this one is full or unreachable); ``retry_after``: the
    worker's Retry-After; ``kind`` and ``param``: the worker's own error type and field,
    when it answered them; ``relayed``: for a worker's client error, its own message,
    which the client gets flat (the exception's text keeps the hop's words for logs and
    the canary)."""

    def __init__(
        self,
        status: int,
        message: str,
        *,
        retryable: bool = False,
        retry_after: str = "",
        kind: str = "",
        param: str | None = None,
        relayed: str | None = None,
    ) -> None:
        super().__init__(message)
        self.status = status
        self.retryable = retryable or status == 503
        self.retry_after = retry_after
        self.kind = kind
        self.param = param
        self.relayed = relayed


def prefill_gone(error: HopError) -> bool:
    """Whether a failed decode hop may be retried from another prefill: the decode said its
    READ from the prefill failed (502: unreachable, disconnected, not held, ...; never a
    client error or the deadline). A prefill hop is stateless and the decode produced no
    output, so a new prefill hop elsewhere is the whole retry."""
    return error.status == 502 and error.kind == TRANSFER_FAILED


def error_kind(data: Any) -> str:
    """The ``error.type`` a worker answered ("" when none)."""
    kind = _error_field(data, "type")
    return kind if isinstance(kind, str) else ""


def error_param(data: Any) -> str | None:
    """The ``error.param`` a worker answered (the field it refused), cut to its bound."""
    param = _error_field(data, "param")
    return bounded(param, PARAM_CHARS) if isinstance(param, str) else None


def _error_field(data: Any, key: str) -> Any:
    """``key`` of a worker's error object: OpenAI's ``{"error": {...}}`` or vLLM's older
    flat ``{"object": "error", ...}``."""
    if not isinstance(data, dict):
        return None
    err = data.get("error")
    if isinstance(err, dict):
        return err.get(key)
    return data.get(key) if data.get("object") == "error" else None


@dataclass(frozen=True)
class Request:
    """One client request through the proxy: its route path, body and the headers every hop
    carries, the deadline all hops share, and headers of one hop only, by role (the canary
    sends each hop to one data-parallel engine)."""

    path: str
    body: dict[str, Any]
    headers: dict[str, str]
    deadline: float
    hops: dict[str, dict[str, str]] = field(default_factory=dict)


@dataclass
class Backend:
    url: str
    inflight: int = 0


class Pool:
    """Workers of one role and the policy that picks among them."""

    def __init__(self, urls: Sequence[str], policy: str, service: str = "") -> None:
        """A pool of ``urls``, or, with ``service`` (a Service's name), of the addresses
        :mod:`disagg_worker.serve.proxy.discovery` keeps setting (:meth:`set_urls`)."""
        if policy not in POLICIES:
            raise ValueError(f"--policy: {policy!r} is not one of {', '.join(POLICIES)}")
        if not urls and not service:
            raise ValueError("a pool needs at least one worker URL")
        self.policy, self.service = policy, service
        self.backends: list[Backend] = []
        # hops that went on to the next worker, by why they left the one they tried
        self.failovers = {"unreachable": 0, "full": 0}
        self.drain = Drain()  # the pool's hops in flight and its measured rate
        self.set_urls(urls)

    @property
    def where(self) -> str:
        """The pool as an error names it: its Service, else its workers."""
        return self.service or bounded(", ".join(b.url for b in self.backends), 200)

    def enter(self, backend: Backend) -> None:
        """A hop goes to ``backend``."""
        backend.inflight += 1
        self.drain.began(time.monotonic())

    def leave(self, backend: Backend, served: bool) -> None:
        """A hop left ``backend``: ``served`` when it did the pool's work (an answer)."""
        backend.inflight -= 1
        self.drain.ended(time.monotonic(), served)

    def shed(self, queue_s: float) -> Shed | None:
        """Whether one more request would wait past ``queue_s`` to start here."""
        return self.drain.shed(time.monotonic(), queue_s, len(self.backends))

    def set_urls(self, urls: Sequence[str]) -> None:
        """The pool's workers are now ``urls``; a worker that stays keeps its in-flight
        count (least-loaded stays right across a refresh)."""
        known = {b.url: b for b in self.backends}
        self.backends = [known.get(u.rstrip("/"), Backend(u.rstrip("/"))) for u in urls]
        self._turn = itertools.cycle(range(max(1, len(self.backends))))

    def pick(self) -> Backend:
        start = next(self._turn)
        order = self.backends[start:] + self.backends[:start]
        if self.policy == "least-loaded":
            return min(order, key=lambda b: b.inflight)  # ties: round-robin order
        return order[0]

    def candidates(
        self, avoid: Collection[str] = (), first: Backend | None = None
    ) -> list[Backend]:
        """``first`` (when still in the pool) or the policy's pick, then every other
        worker (where a full or unreachable worker's request goes next); workers in
        ``avoid`` (URLs) last. No worker (a Service with no ready pod): a 503."""
        if not self.backends:
            raise HopError(503, f"no ready pod behind {self.service}", retry_after="1")
        if first is None or not any(b is first for b in self.backends):
            first = self.pick()
        order = [first, *(b for b in self.backends if b is not first)]
        return [b for b in order if b.url not in avoid] + [b for b in order if b.url in avoid]

    def has_other(self, avoid: Collection[str]) -> bool:
        return any(b.url not in avoid for b in self.backends)


async def first_taker(
    pool: Pool,
    attempt: Callable[[Backend], Awaitable[T]],
    avoid: Collection[str] = (),
    first: Backend | None = None,
    *,
    finishes: bool = True,
    within: Within | None = None,
) -> tuple[Backend, T]:
    """``attempt`` on ``first`` or the pool's pick (workers in ``avoid`` last), then on
    each other worker while the failure is retryable (full or unreachable); the last
    failure is raised. ``finishes``: an answer is the pool's work done (a stream's head is
    not: its relay counts the end); ``within``: the candidates it may use, reordered."""
    candidates = pool.candidates(avoid, first)
    if within is not None:
        candidates = within(candidates)
    for i, backend in enumerate(candidates):
        pool.enter(backend)
        served = False
        try:
            result = await attempt(backend)
            served = finishes
            return backend, result
        except HopError as e:
            if not e.retryable or i == len(candidates) - 1:
                raise
            pool.failovers["full" if e.status == 503 else "unreachable"] += 1
        finally:
            pool.leave(backend, served)
    raise AssertionError("a pool has at least one worker")


def relay_status(status: int) -> int:
    """Client errors, a full worker (503) and a worker's own timeout (504) keep their
    status; any other server-side failure of a worker is a bad gateway here."""
    if status in (503, 504) or 400 <= status < 500:
        return status
    return 502


def message_of(data: Any) -> str:
    """A worker's error message, in our, OpenAI's or vLLM's shape, cut to its bound."""
    if isinstance(data, dict):
        err = data.get("error")
        if isinstance(err, dict) and "message" in err:
            return bounded(str(err["message"]))
        if isinstance(err, str):
            return bounded(err)
        if "message" in data:  # vLLM's ErrorResponse shape
            return bounded(str(data["message"]))
    return bounded(str(data), 300)
