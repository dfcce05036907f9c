"""An OTLP/HTTP trace receiver for tests: an aiohttp server on 127.0.0.1 taking
``POST /v1/traces`` as a collector does, each body decoded by opentelemetry-proto's own
``ExportTraceServiceRequest``: ``application/json`` (the router's and the reference
worker's exporter) or ``application/x-protobuf`` (OpenTelemetry's OTLPSpanExporter, which
vLLM uses); any other type is refused with 415, as the OTLP spec says. A
``Content-Encoding: gzip`` or ``deflate`` body (the exporter's ``OTEL_EXPORTER_OTLP_COMPRESSION``;
none by default in opentelemetry-exporter-otlp-proto-http 1.45) is inflated by aiohttp's
server before it reaches the handler.

OTLP/JSON differs from the proto3 JSON mapping in one place (opentelemetry-proto v1.11.0,
docs/specification.md "JSON Protobuf Encoding"): trace and span ids are hex, not base64.
:func:`decode` turns them to base64 before ``json_format.Parse`` and checks their byte
lengths after, so an id that is not hex of the right size fails here as in a collector.
"""

from __future__ import annotations

import asyncio
import base64
import json
import threading
from dataclasses import dataclass, field
from typing import Any

from aiohttp import web
from google.protobuf import json_format
from opentelemetry.proto.collector.trace.v1.trace_service_pb2 import (
    ExportTraceServiceRequest,
)

_IDS = {"traceId": 16, "spanId": 8, "parentSpanId": 8}


def _ids_to_base64(node: Any) -> Any:
    if isinstance(node, list):
        return [_ids_to_base64(n) for n in node]
    if not isinstance(node, dict):
        return node
    out = {}
    for key, value in node.items():
        if key in _IDS and isinstance(value, str):
            raw = bytes.fromhex(value)  # ValueError: not hex
            out[key] = base64.b64encode(raw).decode()
        else:
            out[key] = _ids_to_base64(value)
    return out


JSON = "application/json"
PROTOBUF = "application/x-protobuf"


class UnsupportedType(ValueError):
    """A body neither OTLP/JSON nor OTLP/protobuf (a collector answers 415)."""


def decode(body: bytes, content_type: str = JSON) -> ExportTraceServiceRequest:
    """One OTLP export request, parsed strictly (JSON: unknown fields refused; protobuf:
    a body that does not parse as the message refused)."""
    if content_type == PROTOBUF:
        message = ExportTraceServiceRequest.FromString(body)
    elif content_type == JSON:
        message = ExportTraceServiceRequest()
        json_format.Parse(json.dumps(_ids_to_base64(json.loads(body))), message)
    else:
        raise UnsupportedType(f"Content-Type {content_type!r}: want {JSON} or {PROTOBUF}")
    for rs in message.resource_spans:
        for ss in rs.scope_spans:
            for span in ss.spans:
                assert len(span.trace_id) == 16 and len(span.span_id) == 8, span
                assert len(span.parent_span_id) in (0, 8), span
    return message


@dataclass(frozen=True)
class Received:
    """One span as it arrived, with the service that sent it (and its whole resource)."""

    service: str
    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    attributes: dict[str, Any]
    status: int
    state: str = ""
    resource: dict[str, Any] = field(default_factory=dict)


def spans_of(message: ExportTraceServiceRequest) -> list[Received]:
    out = []
    for rs in message.resource_spans:
        resource = {a.key: _value(a.value) for a in rs.resource.attributes}
        for ss in rs.scope_spans:
            for s in ss.spans:
                out.append(Received(
                    resource.get("service.name", ""), s.trace_id.hex(), s.span_id.hex(),
                    s.parent_span_id.hex(), s.name, s.kind,
                    {a.key: _value(a.value) for a in s.attributes}, s.status.code,
                    s.trace_state, resource,
                ))  # fmt: skip
    return out


def _value(v: Any) -> Any:
    return getattr(v, v.WhichOneof("value")) if v.WhichOneof("value") else None


class Receiver:
    """The server, on a thread of its own: :attr:`url` takes exports, :attr:`spans` holds
    every span decoded, :attr:`content_types` and :attr:`encodings` each request's.
    ``host``: the address it listens at (a local run's pods reach this host at any
    loopback address but 127.0.0.1, which is each pod's own)."""

    def __init__(self, host: str = "127.0.0.1") -> None:
        self.host = host
        self.spans: list[Received] = []
        self.content_types: list[str] = []
        self.encodings: list[str] = []
        self.errors: list[str] = []
        self.url = ""
        self._loop = asyncio.new_event_loop()
        self._started = threading.Event()
        self._thread = threading.Thread(target=self._serve, daemon=True)

    async def _traces(self, request: web.Request) -> web.Response:
        self.content_types.append(request.content_type)
        self.encodings.append(request.headers.get("Content-Encoding", ""))
        try:
            body = await request.read()
            self.spans.extend(spans_of(decode(body, request.content_type)))
        except UnsupportedType as e:
            self.errors.append(str(e))
            return web.json_response({"error": str(e)}, status=415)
        except Exception as e:  # what a collector refuses: 400, remembered for the test
            self.errors.append(f"{type(e).__name__}: {e}")
            return web.json_response({"error": str(e)}, status=400)
        return web.json_response({})

    def _serve(self) -> None:
        asyncio.set_event_loop(self._loop)
        app = web.Application()
        app.router.add_post("/v1/traces", self._traces)
        self._runner = web.AppRunner(app)
        self._loop.run_until_complete(self._runner.setup())
        site = web.TCPSite(self._runner, self.host, 0)
        self._loop.run_until_complete(site.start())
        port = self._runner.addresses[0][1]
        self.url = f"http://{self.host}:{port}/v1/traces"
        self._started.set()
        self._loop.run_forever()

    def __enter__(self) -> Receiver:
        self._thread.start()
        self._started.wait(10)
        return self

    def __exit__(self, *_: object) -> None:
        async def stop() -> None:
            await self._runner.cleanup()

        asyncio.run_coroutine_threadsafe(stop(), self._loop).result(10)
        self._loop.call_soon_threadsafe(self._loop.stop)
        self._thread.join(10)


def tree(spans: list[Received]) -> str:
    """The spans as an indented tree under their roots (a parent not received: a root)."""
    ids = {s.span_id for s in spans}
    children: dict[str, list[Received]] = {}
    for s in spans:
        children.setdefault(s.parent_id if s.parent_id in ids else "", []).append(s)
    lines: list[str] = []

    def walk(parent: str, depth: int) -> None:
        for s in children.get(parent, []):
            attrs = ", ".join(f"{k}={v}" for k, v in sorted(s.attributes.items()))
            lines.append(f"{'  ' * depth}{s.service}: {s.name} [{attrs}]")
            walk(s.span_id, depth + 1)

    walk("", 0)
    return "\n".join(lines)
