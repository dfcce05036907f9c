"""`disagg proxy`: the P/D proxy — each completion or chat completion goes to a prefill
worker, then to a decode worker told where the prefill's KV is.

I/O layer (aiohttp server and client; no torch). The hops speak the engine's P/D protocol
(:mod:`disagg_worker.serve.pd`), so the same flow fronts ``vllm serve`` and the reference
worker, sequential or concurrent (both hops at once). Shedding, hop retries, the prefill's
release and one deadline over both hops live here because only the proxy sees a request
whole; what each does: docs/local-run.md (the proxy), docs/worker.md, docs/routing.md.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections.abc import Awaitable, Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Generic, TypeVar
from urllib.parse import urlsplit

import aiohttp
from aiohttp import web

from disagg_worker.serve.pd.evidence import DECODE_COMPUTED
from disagg_worker.serve.proxy.config import DEFAULT, ProxyConfig
from disagg_worker.serve.proxy.discovery import Refresher
from disagg_worker.serve.proxy.hops import (
    RELEASE_TIMEOUT_S,
    HopClient,
    relay_stream,
    stream_headers,
)
from disagg_worker.serve.proxy.metrics import ProxyMetrics
from disagg_worker.serve.proxy.planner import Plan, Planner
from disagg_worker.serve.proxy.revisions import Pair, Pairs
from disagg_worker.serve.proxy.rules import locality, shedding
from disagg_worker.serve.proxy.rules.routing import Route
from disagg_worker.serve.proxy.upstream import (
    Backend,
    HopError,
    Pool,
    Request,
    Within,
    first_taker,
    prefill_gone,
)
from disagg_worker.serve.proxy.zones import Zones
from disagg_worker.serve.rules.otlp import CLIENT
from disagg_worker.serve.rules.timings import FIELD as TIMINGS
from disagg_worker.serve.rules.timings import ProxyFigures, Timings
from disagg_worker.serve.tracing import ActiveSpan, Tracer

log = logging.getLogger("disagg.proxy")
T = TypeVar("T")
A = TypeVar("A")
B = TypeVar("B")


@dataclass(frozen=True)
class Paired(Generic[T]):
    """A prefill hop and the decode step after it: the prefill that answered, its answer,
    what the decode step gave, the prefills tried before it, when its hop ended, and when
    the decode hop began if not then (both hops at once)."""

    prefill: Backend
    answer: dict[str, Any]
    decoded: T
    tried: list[str]
    prefilled_at: float
    decode_began: float | None = None

    @property
    def decode_from(self) -> float:
        return self.prefilled_at if self.decode_began is None else self.decode_began


class Proxy:
    """A pair of pools per KV revision, one client session, the routing policy and the
    request flow."""

    def __init__(
        self,
        prefill: Sequence[str] | Pool | Pairs,
        decode: Sequence[str] | Pool | None = None,
        config: ProxyConfig = DEFAULT,
        *,
        refreshers: Sequence[Refresher] = (),
        after_prefill: Callable[[Any], Awaitable[None]] | None = None,
        zones: Zones | None = None,
    ) -> None:
        """``prefill`` and ``decode``: worker URLs, or pools that ``refreshers`` keep
        current from their Services (:mod:`disagg_worker.serve.proxy.discovery`); or
        ``prefill`` the pools of every KV revision (:mod:`.revisions`), ``decode`` None.
        ``config``: the deadline, retries, routing policy and P/D protocol
        (:mod:`disagg_worker.serve.proxy.config`); ``zones``: where each pod sits, read
        when ``config.locality`` pairs within zones (:mod:`.zones`)."""
        if isinstance(prefill, Pairs):
            self.pairs = prefill
        else:
            assert decode is not None, "a decode pool goes with a prefill pool"
            pools = [
                p if isinstance(p, Pool) else Pool(p, config.policy) for p in (prefill, decode)
            ]
            self.pairs = Pairs([Pair("", *pools)], config.policy)
        self.config = config
        self.after_prefill = after_prefill  # a test seam: act between the two hops
        self.retried = 0  # decodes retried from another prefill (config.prefill_retries)
        self.refreshers = list(refreshers)
        self.zones = zones if config.locality is not None else None
        self.metrics = ProxyMetrics()
        if self.zones is not None:
            self.zones.on_failure = self.metrics.zones_unread
        self.tracer = Tracer(config.tracing, self.metrics.registry)
        self.http = HopClient(config.timeout_s)
        self.planner = Planner(config.routing, self.pairs, self.http.post, self.metrics)
        self._releases: set[asyncio.Task[None]] = set()

    async def start(self, _: web.Application | None = None) -> None:
        await self.http.start()
        await self.tracer.start_export()
        for refresher in self.refreshers:
            await refresher.start()
        await self.planner.start()
        if self.zones is not None:
            await self.zones.start()

    async def close(self, _: web.Application | None = None) -> None:
        await self.planner.close()
        for refresher in self.refreshers:
            await refresher.close()
        if self.zones is not None:
            await self.zones.close()
        if self._releases:
            await asyncio.wait(self._releases, timeout=RELEASE_TIMEOUT_S)
        await self.http.close()
        await self.tracer.close()

    def release_later(self, prefill: Backend, handoff: Any, headers: dict[str, str]) -> None:
        """The decode hop failed: tell the prefill to free the blocks (in the background,
        best effort; the lease stays the backstop), when its protocol has a way to."""
        call = self.config.protocol.release(handoff)
        if call is None:
            return
        task = asyncio.ensure_future(self.http.release(prefill.url, call, headers))
        self._releases.add(task)
        task.add_done_callback(self._releases.discard)

    async def complete(
        self,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        hop_headers: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """One request on its route: both hops, or decode alone; ``headers`` (request id,
        the client's Authorization) go to every hop, ``hop_headers[role]`` to that role's
        only."""
        req = replace(self._request(path, body, headers), hops=hop_headers or {})
        t0 = time.perf_counter()
        plan = await self._route(req)
        hops = time.perf_counter()  # the hops' times leave out the routing (a tokenize call)
        prefill: Timings | None = None
        if plan.route.path == "decode":
            d, out = await self._local(req, plan.pair, plan.decode)
            hop = ProxyFigures(decode_url=d.url, decode_hop_ms=_ms(hops))
        else:
            d, out, hop, prefill = await self._both(req, plan, hops)
            why = self.config.protocol.recomputed(out)
            if why is not None:  # correct tokens, but no P/D: counted, never silent
                self.metrics.recomputed(DECODE_COMPUTED)
                log.warning("decode %s: %s", d.url, why)
        proxy = replace(hop, **_route_figures(plan.route), total_ms=_ms(t0))
        self._answered(plan, d)
        return {**out, TIMINGS: _timings(out, d.url).with_proxy(proxy, prefill).to_wire()}

    async def _route(self, req: Request) -> Plan:
        """The request's plan, admitted (:meth:`_admit`), in a ``route`` span."""
        with self.tracer.span("route") as span:
            plan = await self.planner.plan(req)
            span.set(_route_attributes(plan))
            self._admit(plan)
        return plan

    async def _traced(
        self, role: str, url: str, req: Request, send: Callable[[dict[str, str]], Awaitable[T]]
    ) -> T:
        """One hop's HTTP call in a client span of its own, its ``traceparent`` naming that
        span: the worker's spans are its children."""
        with self.tracer.span(f"{role} hop", CLIENT) as span:
            span.set(_hop_attributes(role, url))
            try:
                got = await send(
                    {**req.headers, **req.hops.get(role, {}), **span.context.headers()}
                )
            except HopError as e:
                _hop_failed(span, e)
                raise
            status = getattr(got, "status", None)
            span.set({"http.response.status_code": status if isinstance(status, int) else 200})
            return got

    def _request(self, path: str, body: dict[str, Any], headers: dict[str, str]) -> Request:
        return Request(path, body, headers, time.monotonic() + self.config.timeout_s)

    def _admit(self, plan: Plan) -> None:
        """Refuse (503, counted) a request that a pool of its route would not start within
        ``queue_s``: the prefill's first on a P/D route, then the decode's."""
        pools = [("prefill", plan.pair.prefill)] if plan.route.path == "pd" else []
        for role, pool in [*pools, ("decode", plan.pair.decode)]:
            shed = pool.shed(self.config.queue_s)
            if shed is not None:
                self.metrics.shed(role)
                text = shedding.message(role, pool.where, shed, self.config.queue_s)
                raise HopError(503, text, retry_after=str(shed.retry_after_s))

    async def _both(
        self, req: Request, plan: Plan, start: float
    ) -> tuple[Backend, dict[str, Any], ProxyFigures, Timings | None]:
        """Prefill, then decode with its handoff (:meth:`_pair`); ``start``: when the
        prefill hop began. With the hops' figures and the prefill's timings."""

        def decode(
            second: dict[str, Any], prefill: Backend
        ) -> Awaitable[tuple[Backend, dict[str, Any]]]:
            near = self._near(prefill)
            return self._hop(
                "decode", plan.pair.decode, req, second, first=plan.decode, within=near
            )

        paired = await self._pair(req, plan, decode)
        d, out = paired.decoded
        self._count_pair(paired.prefill, d)
        hop = ProxyFigures(
            prefill_url=paired.prefill.url,
            decode_url=d.url,
            prefill_hop_ms=(paired.prefilled_at - start) * 1000.0,
            decode_hop_ms=_ms(paired.decode_from),
            prefill_retries=len(paired.tried),
        )
        prefill = None
        if paired.answer.get(TIMINGS) is not None:
            prefill = _timings(paired.answer, paired.prefill.url)
        return d, out, hop, prefill

    async def _pair(
        self,
        req: Request,
        plan: Plan,
        decode: Callable[[dict[str, Any], Backend], Awaitable[T]],
        drop: Callable[[T], None] = lambda _: None,
    ) -> Paired[T]:
        """The prefill hop, then ``decode`` of the client's body with the prefill's handoff
        (and that prefill, whose zone may bound the decode's); a decode that could not read
        the KV is retried from another prefill. A concurrent protocol's hops go at once
        (:meth:`_together`; ``drop`` frees a decode step's result that is not wanted)."""
        pair = plan.pair
        if self.config.protocol.concurrent:
            return await self._together(req, plan, decode, drop)
        tried: list[str] = []
        while True:
            p, pre, handoff = await self._prefill(req, pair, tried, self._prefills(plan))
            t1 = time.perf_counter()
            second = self.config.protocol.decode(req.body, handoff)
            try:
                return Paired(p, pre, await decode(second, p), tried, t1)
            except HopError as e:  # the prefill's blocks go now; its READ may be retried
                self.release_later(p, handoff, req.headers)
                if not self._retry(e, p, pair.prefill, tried):
                    raise
            except BaseException:  # the client left: the prefill's blocks go now
                self.release_later(p, handoff, req.headers)
                raise

    async def _together(
        self,
        req: Request,
        plan: Plan,
        decode: Callable[[dict[str, Any], Backend], Awaitable[T]],
        drop: Callable[[T], None],
    ) -> Paired[T]:
        """Both hops at once, their bodies naming the prefill picked
        (:meth:`PdProtocol.pair`). A prefill that is full or unreachable is left for the
        next of its pool, with new bodies (the decode sent for it is cancelled); any other
        failure of either hop cancels the other and is the request's."""
        pair, within = plan.pair, self._prefills(plan)
        candidates = pair.prefill.candidates()
        candidates = within(candidates) if within is not None else candidates
        tried: list[str] = []
        for i, p in enumerate(candidates):
            first, second = self.config.protocol.pair(req.body, p.url)
            start = time.perf_counter()
            pair.prefill.enter(p)
            served = False  # the prefill answered (its pool's work is done)
            try:
                pre, got = await _at_once(self._prefill_hop(req, p, first), decode(second, p))
                served = not isinstance(pre, BaseException)
            finally:
                pair.prefill.leave(p, served)
            if isinstance(pre, BaseException) and not isinstance(pre, asyncio.CancelledError):
                if not isinstance(got, BaseException):
                    drop(got)  # an opened decode stream whose prefill failed
                if not isinstance(pre, HopError) or not pre.retryable or i == len(candidates) - 1:
                    raise pre
                tried.append(p.url)
                pair.prefill.failovers["full" if pre.status == 503 else "unreachable"] += 1
                continue
            if isinstance(got, BaseException):
                raise got  # the decode failed: its prefill hop was cancelled
            assert not isinstance(pre, BaseException)
            answer, prefilled_at = pre
            return Paired(p, answer, got, tried, prefilled_at, decode_began=start)
        raise AssertionError("a pool has at least one worker")

    async def _prefill_hop(
        self, req: Request, prefill: Backend, body: dict[str, Any]
    ) -> tuple[dict[str, Any], float]:
        """A concurrent protocol's prefill hop on ``prefill``: its answer, when it ended."""
        url = prefill.url + req.path
        answer = await self._traced(
            "prefill", url, req, lambda h: self.http.post("prefill", url, body, h, req.deadline)
        )
        return answer, time.perf_counter()

    def _answered(self, plan: Plan, decode: Backend) -> None:
        """A request ended well on ``decode``: count its route, remember its prefix there."""
        self.metrics.request(plan.route.path, plan.route.reason)
        self.planner.answered(plan, decode)

    async def stream(
        self, request: web.Request, path: str, body: dict[str, Any], headers: dict[str, str]
    ) -> web.StreamResponse:
        """The request on its route as for :meth:`complete`, with decode's event stream
        passed through as it comes. An error before decode's first byte is raised
        (answered as JSON); after it, it ends the stream with an ``{"error": ...}``
        event."""
        req = self._request(path, body, headers)
        plan = await self._route(req)
        route = _route_figures(plan.route)  # with the counted and cached tokens, if counted
        if plan.route.path == "decode":
            backend, resp = await self._open_decode(req, plan, self.config.protocol.local(body))
        else:
            backend, resp, hop = await self._open_both(req, plan)
            route.update(hop)
        route["decode_url"] = backend.url
        plan.pair.decode.enter(backend)
        served = False
        try:
            where = f"decode {backend.url + path}"
            out = await relay_stream(request, resp, where, headers, stream_headers(route))
            served = True
        except BaseException:  # cancelled when the client left: decode must stop too
            resp.close()
            raise
        finally:
            resp.release()
            plan.pair.decode.leave(backend, served)
        self._answered(plan, backend)
        return out

    async def _open_both(
        self, req: Request, plan: Plan
    ) -> tuple[Backend, aiohttp.ClientResponse, dict[str, Any]]:
        """Prefill, then open decode's stream (:meth:`_pair`: retried only before
        decode's first byte, when nothing reached the client); with the prefill hop's
        figures (its worker, time and retries) for the stream's headers."""

        def decode(
            second: dict[str, Any], prefill: Backend
        ) -> Awaitable[tuple[Backend, aiohttp.ClientResponse]]:
            return self._open_decode(req, plan, second, prefill)

        start = time.perf_counter()
        paired = await self._pair(req, plan, decode, lambda got: got[1].close())
        d, resp = paired.decoded
        self._count_pair(paired.prefill, d)
        hop = {"prefill_url": paired.prefill.url,
               "prefill_hop_ms": (paired.prefilled_at - start) * 1000.0,
               "prefill_retries": len(paired.tried)}  # fmt: skip
        return d, resp, hop

    async def _open_decode(
        self, req: Request, plan: Plan, body: dict[str, Any], prefill: Backend | None = None
    ) -> tuple[Backend, aiohttp.ClientResponse]:
        """The streaming decode hop of ``body``, on the next decode worker when one is
        full or down (one that may read ``prefill``'s KV, when given)."""

        def send(b: Backend) -> Awaitable[aiohttp.ClientResponse]:
            url = b.url + req.path
            return self._traced(
                "decode", url, req, lambda h: self.http.open(url, body, h, req.deadline)
            )

        return await first_taker(
            plan.pair.decode,
            send,
            first=plan.decode,
            finishes=False,  # the relay counts the stream's end
            within=None if prefill is None else self._near(prefill),
        )

    def _retry(self, error: HopError, prefill: Backend, pool: Pool, tried: list[str]) -> bool:
        """Whether a failed decode hop is retried from another prefill of ``pool`` (its
        READ from ``prefill`` failed, another prefill is there, retries are left); counts
        it."""
        tried.append(prefill.url)
        if not prefill_gone(error) or len(tried) > self.config.prefill_retries:
            return False
        if not pool.has_other(tried):
            return False
        self.retried += 1
        self.metrics.retried()
        log.warning(
            "decode could not read its KV from prefill %s; retrying: %s", prefill.url, error
        )
        return True

    async def _prefill(
        self, req: Request, pair: Pair, avoid: Sequence[str] = (), within: Within | None = None
    ) -> tuple[Backend, dict[str, Any], Any]:
        """The prefill hop (on a worker of ``pair`` not in ``avoid`` when there is one,
        among those ``within`` keeps): the worker, its answer and the handoff for decode."""
        first = self.config.protocol.prefill(req.body)
        p, pre = await self._hop("prefill", pair.prefill, req, first, avoid, within=within)
        try:
            handoff = self.config.protocol.handoff(pre)
        except ValueError as e:
            raise HopError(502, f"prefill {p.url} returned unreadable {e}") from None
        if handoff is None:
            raise HopError(
                502,
                f"prefill {p.url} returned no {self.config.protocol.handoff_name}; "
                f"{self.config.protocol.no_handoff}",
            )
        if self.after_prefill is not None:
            await self.after_prefill(handoff)
        return p, pre, handoff

    async def aggregated(
        self,
        path: str,
        body: dict[str, Any],
        headers: dict[str, str],
        hop_headers: dict[str, dict[str, str]] | None = None,
    ) -> dict[str, Any]:
        """One request straight to a decode worker, no prefill hop, whatever the policy,
        bounded by the same deadline (``hop_headers["decode"]``: headers for it alone)."""
        req = replace(self._request(path, body, headers), hops=hop_headers or {})
        _, out = await self._local(req, self.pairs.choose())
        return out

    async def _local(
        self, req: Request, pair: Pair, first: Backend | None = None
    ) -> tuple[Backend, dict[str, Any]]:
        """Decode alone: it prefills the prompt itself, on purpose (the protocol's local
        body says so, so the worker does not count a fallback)."""
        local = self.config.protocol.local(req.body)
        return await self._hop("decode", pair.decode, req, local, first=first)

    async def _hop(
        self,
        role: str,
        pool: Pool,
        req: Request,
        body: dict[str, Any],
        avoid: Sequence[str] = (),
        first: Backend | None = None,
        within: Within | None = None,
    ) -> tuple[Backend, dict[str, Any]]:
        """POST ``body`` (the hop's, not the client's) to ``first`` or the pool's pick;
        when it is full or unreachable, to each other worker (those in ``avoid`` last),
        among those ``within`` keeps."""

        def send(b: Backend) -> Awaitable[dict[str, Any]]:
            url = b.url + req.path
            return self._traced(
                role, url, req, lambda h: self.http.post(role, url, body, h, req.deadline)
            )

        return await first_taker(pool, send, avoid, first, within=within)

    def _prefills(self, plan: Plan) -> Within | None:
        """Under transfer locality, the prefills ranked by the decodes their zone holds (the
        planner's pick first: :func:`.rules.locality.prefill_order`); Required refuses
        (503, counted) when no prefill has a decode in its zone."""
        mode, zones = self.config.locality, self.zones
        if mode is None or zones is None:
            return None
        decodes = [zones.zone(b.url) for b in plan.pair.decode.backends]
        planned = [zones.zone(plan.decode.url)] if plan.decode is not None else []

        def order(candidates: list[Backend]) -> list[Backend]:
            found = [zones.zone(b.url) for b in candidates]
            ranked = locality.prefill_order(mode, found, decodes, planned)
            if not ranked:
                self.metrics.locality_refused(locality.named(found[0]))
                raise HopError(503, locality.no_pair(found, decodes), retry_after="1")
            return [candidates[i] for i in ranked]

        return order

    def _near(self, prefill: Backend) -> Within | None:
        """Under transfer locality, the decodes that may read ``prefill``'s KV, its zone's
        first (:func:`.rules.locality.decode_order`); Required refuses (503, counted) when
        its zone has none."""
        mode, zones = self.config.locality, self.zones
        if mode is None or zones is None:
            return None
        zone = zones.zone(prefill.url)

        def order(candidates: list[Backend]) -> list[Backend]:
            found = [zones.zone(b.url) for b in candidates]
            kept = locality.decode_order(mode, zone, found)
            if not kept:
                self.metrics.locality_refused(locality.named(zone))
                raise HopError(503, locality.no_decode(zone, prefill.url), retry_after="1")
            return [candidates[i] for i in kept]

        return order

    def _count_pair(self, prefill: Backend, decode: Backend) -> None:
        """A P/D request's pair, same zone or not, under transfer locality."""
        if self.zones is not None:
            self.metrics.paired(self.zones.zone(prefill.url) == self.zones.zone(decode.url))


async def _at_once(
    first: Awaitable[A], second: Awaitable[B]
) -> tuple[A | BaseException, B | BaseException]:
    """``first`` and ``second`` at once, each's result or exception; when one fails the
    other is cancelled (its exception: CancelledError). Cancelled itself (the client
    left), it cancels both."""
    a, b = asyncio.ensure_future(first), asyncio.ensure_future(second)
    try:
        await asyncio.wait((a, b), return_when=asyncio.FIRST_EXCEPTION)
    finally:  # one failed, or the client left: nothing of the other is wanted
        for task in (a, b):
            task.cancel()
        await asyncio.wait((a, b))
    return _outcome(a), _outcome(b)


def _outcome(task: asyncio.Future[T]) -> T | BaseException:
    if task.cancelled():
        return asyncio.CancelledError()
    return task.exception() or task.result()


def _timings(answer: dict[str, Any], url: str) -> Timings:
    """A worker's ``disagg`` object (empty when it sent none, or one this proxy cannot
    read: the answer is still good)."""
    try:
        return Timings.from_wire(answer.get(TIMINGS))
    except ValueError as e:
        log.warning("worker %s: its figures are left out: %s", url, e)
        return Timings()


def _route_figures(route: Route) -> dict[str, Any]:
    out: dict[str, Any] = {"path": route.path, "route_reason": route.reason}
    if route.prompt_tokens is not None:
        out.update(prompt_tokens=route.prompt_tokens, cached_tokens=route.cached_tokens)
    return out


def _route_attributes(plan: Plan) -> dict[str, Any]:
    route = plan.route
    return {"disagg.route.path": route.path, "disagg.route.reason": route.reason,
            "disagg.route.prompt_tokens": route.prompt_tokens,
            "disagg.route.cached_tokens": route.cached_tokens,
            "disagg.route.decode": plan.decode.url if plan.decode is not None else None,
            "disagg.kv_revision": plan.pair.kv or None}  # fmt: skip


def _hop_attributes(role: str, url: str) -> dict[str, Any]:
    """A hop's client-span attributes (OpenTelemetry's HTTP client conventions)."""
    where = urlsplit(url)
    return {"disagg.hop": role, "http.request.method": "POST", "url.full": url,
            "server.address": where.hostname, "server.port": where.port}  # fmt: skip


def _hop_failed(span: ActiveSpan, error: HopError) -> None:
    """A hop's failure on its span: the status the proxy relays, and why."""
    span.set({"http.response.status_code": error.status, "error.type": str(error.status)})
    span.fail(str(error))


def _ms(since: float) -> float:
    return (time.perf_counter() - since) * 1000.0
