"""Spans of the requests this process serves, and their export to an OTLP collector.

I/O layer (asyncio, aiohttp, prometheus_client). A :class:`Tracer` opens spans; the one
a task is in is :data:`CURRENT` (a context variable: it follows a request through its
tasks, as OpenTelemetry's own context does), so the code that sends a hop or reads KV
asks for no parent. Ended spans of sampled traces go to an :class:`Exporter`: a bounded
queue, flushed in batches by one background task as OTLP/HTTP JSON
(:mod:`.rules.otlp`). A request never waits on it: a full queue drops the span and counts
it, so a slow or dead collector costs spans, never serving time.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import os
import time
from collections import deque
from collections.abc import Callable, Iterator, Mapping
from contextvars import ContextVar
from typing import Any

import aiohttp
from aiohttp import web
from prometheus_client import CollectorRegistry, Counter

from disagg_worker.serve.rules import tracecontext
from disagg_worker.serve.rules.otlp import (
    CONTENT_TYPE,
    ERROR,
    INTERNAL,
    SERVER,
    Settings,
    Span,
    Value,
    export_request,
)
from disagg_worker.serve.rules.tracecontext import RandomBytes, SpanContext

log = logging.getLogger("disagg.tracing")
OFF = Settings()  # no endpoint: spans carry the trace on, nothing is exported
SCOPE = "disagg"
# the span the running task is in (None: outside any request)
CURRENT: ContextVar[SpanContext | None] = ContextVar("disagg_span", default=None)


class ActiveSpan:
    """A span being timed: attributes and status set as the work goes, :meth:`end` once."""

    def __init__(
        self, tracer: Tracer, name: str, kind: int, parent: SpanContext | None, remote: bool
    ) -> None:
        self.tracer, self.name, self.kind = tracer, name, kind
        span_id = tracecontext.new_span_id(tracer.random)
        trace_id = parent.trace_id if parent else tracecontext.new_trace_id(tracer.random)
        self.context = tracecontext.start(parent, span_id, trace_id, tracer.settings.ratio)
        self.parent_id = parent.span_id if parent else ""
        self.remote = remote
        self.start_ns = tracer.clock()
        self.attributes: dict[str, Value] = {}
        self.status, self.message = 0, ""
        self.ended = False

    def set(self, attributes: Mapping[str, Value | None]) -> None:
        """Add attributes (a None value is left out)."""
        self.attributes.update({k: v for k, v in attributes.items() if v is not None})

    def answered(self, status: int) -> None:
        """An HTTP answer's status; a 5xx fails the span (OpenTelemetry's HTTP
        conventions: a 4xx is the client's, not the server's, error)."""
        self.set({"http.response.status_code": status})
        if status >= 500:
            self.set({"error.type": str(status)})
            self.fail(f"answered {status}")

    def fail(self, message: str) -> None:
        self.status, self.message = ERROR, message[:512]

    def end(self) -> None:
        if self.ended:
            return
        self.ended = True
        if self.context.sampled and self.tracer.exporter is not None:
            self.tracer.exporter.add(self.finished(self.tracer.clock()))

    def finished(self, end_ns: int) -> Span:
        c = self.context
        return Span(c.trace_id, c.span_id, self.parent_id, self.name, self.kind,
                    self.start_ns, end_ns, dict(self.attributes), self.status, self.message,
                    c.flags, c.state, self.remote)  # fmt: skip


class Tracer:
    """Opens this process's spans; exports them when ``settings`` name an endpoint (else
    spans are only ids: the trace still passes on to the next hop)."""

    def __init__(
        self,
        settings: Settings = OFF,
        registry: CollectorRegistry | None = None,
        random: RandomBytes = os.urandom,
        clock: Callable[[], int] = time.time_ns,
    ) -> None:
        self.settings, self.random, self.clock = settings, random, clock
        self.exporter = Exporter(settings, registry) if settings.endpoint else None

    def start(
        self,
        name: str,
        kind: int = INTERNAL,
        parent: SpanContext | None = None,
        *,
        remote: bool = False,
    ) -> ActiveSpan:
        """A span under ``parent`` (a caller's, ``remote``) or else the task's current one;
        a new trace when there is neither."""
        return ActiveSpan(self, name, kind, parent or CURRENT.get(), remote)

    @contextlib.contextmanager
    def span(
        self,
        name: str,
        kind: int = INTERNAL,
        parent: SpanContext | None = None,
        *,
        remote: bool = False,
    ) -> Iterator[ActiveSpan]:
        """:meth:`start`, the task's current span while inside, ended on the way out (an
        exception marks it failed)."""
        active = self.start(name, kind, parent, remote=remote)
        token = CURRENT.set(active.context)
        try:
            yield active
        except BaseException as e:
            if not active.status:
                active.fail(f"{type(e).__name__}: {e}")
            raise
        finally:
            CURRENT.reset(token)
            active.end()

    async def start_export(self, _: Any = None) -> None:
        if self.exporter is not None:
            await self.exporter.start()

    async def close(self, _: Any = None) -> None:
        if self.exporter is not None:
            await self.exporter.close()


@contextlib.contextmanager
def server_span(tracer: Tracer, request: web.Request) -> Iterator[ActiveSpan]:
    """A request's server span under its caller's ``traceparent`` (none, repeated or invalid:
    a new trace), with OpenTelemetry's HTTP server attributes."""
    parent = tracecontext.incoming(
        request.headers.getall(tracecontext.TRACEPARENT, []),
        request.headers.getall(tracecontext.TRACESTATE, []),
    )
    name = f"{request.method} {request.path}"
    with tracer.span(name, SERVER, parent, remote=parent is not None) as span:
        span.set({"http.request.method": request.method, "url.path": request.path,
                  "http.route": request.path, "url.scheme": request.scheme,
                  "user_agent.original": request.headers.get("User-Agent")})  # fmt: skip
        yield span


class Exporter:
    """Ended spans, queued (at most ``max_queue``; more are dropped and counted) and sent
    in batches of ``batch`` every ``delay_s`` or as soon as a batch is full."""

    def __init__(self, settings: Settings, registry: CollectorRegistry | None = None) -> None:
        self.settings = settings
        self.queue: deque[Span] = deque()
        self.resource: dict[str, Value] = {
            "service.name": settings.service or "disagg",
            "process.pid": os.getpid(),
        }
        r = registry if registry is not None else CollectorRegistry()
        self.exported = Counter(
            "disagg_trace_spans_exported", "spans sent to the OTLP collector", registry=r
        )
        self.dropped = Counter(
            "disagg_trace_spans_dropped",
            "spans not sent: the queue was full (queue_full) or the collector failed "
            "(export_failed)",
            ["reason"],
            registry=r,
        )
        self._wake = asyncio.Event()
        self._stopping = False
        self._task: asyncio.Task[None] | None = None
        self._session: aiohttp.ClientSession | None = None

    def add(self, span: Span) -> None:
        """Queue an ended span; never waits."""
        if len(self.queue) >= self.settings.max_queue:
            self.dropped.labels("queue_full").inc()
            return
        self.queue.append(span)
        if len(self.queue) >= self.settings.batch:
            self._wake.set()

    async def start(self) -> None:
        self._session = aiohttp.ClientSession()
        self._task = asyncio.ensure_future(self._run())

    async def close(self) -> None:
        """Stop the loop, then one last flush, bounded by the export timeout. The loop stops
        on a flag as well as on the cancel, which can be lost: Python 3.11's ``wait_for``
        returns a wait that ended as the cancel came, and on Python 3.10 aiohttp turns a
        cancel that comes with a POST's own timeout into the TimeoutError of a failed
        export."""
        self._stopping = True
        if self._task is not None:
            self._task.cancel()
            with contextlib.suppress(asyncio.CancelledError):
                await self._task
        with contextlib.suppress(asyncio.TimeoutError):
            await asyncio.wait_for(self.flush(), self.settings.timeout_s)
        if self._session is not None:
            await self._session.close()

    async def _run(self) -> None:
        while not self._stopping:
            with contextlib.suppress(asyncio.TimeoutError):
                await asyncio.wait_for(self._wake.wait(), self.settings.delay_s)
            self._wake.clear()
            while self.queue and not self._stopping:
                await self._send(self._batch())

    async def flush(self) -> None:
        """Send every queued span, a batch per POST."""
        while self.queue:
            await self._send(self._batch())

    def _batch(self) -> list[Span]:
        n = min(len(self.queue), self.settings.batch)
        return [self.queue.popleft() for _ in range(n)]

    async def _send(self, batch: list[Span]) -> None:
        assert self._session is not None, "Exporter.start() first"
        body = json.dumps(export_request(batch, self.resource, SCOPE, "1")).encode()
        timeout = aiohttp.ClientTimeout(total=self.settings.timeout_s)
        headers = {"Content-Type": CONTENT_TYPE}
        try:
            async with self._session.post(
                self.settings.endpoint, data=body, headers=headers, timeout=timeout
            ) as resp:
                await resp.read()
                ok = 200 <= resp.status < 300
                why = f"answered {resp.status}"
        except (aiohttp.ClientError, asyncio.TimeoutError, OSError) as e:
            ok, why = False, f"{type(e).__name__}: {e}"
        if ok:
            self.exported.inc(len(batch))
            return
        self.dropped.labels("export_failed").inc(len(batch))
        log.warning("OTLP export of %d spans to %s failed: %s", len(batch),
                    self.settings.endpoint, why)  # fmt: skip
