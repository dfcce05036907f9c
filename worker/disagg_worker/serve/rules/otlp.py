"""A finished span and a batch of them as an OTLP/HTTP JSON export request.

The shape is opentelemetry-proto's ``ExportTraceServiceRequest`` (read at
open-telemetry/opentelemetry-proto v1.11.0: trace/v1/trace.proto, common/v1/common.proto,
docs/specification.md "JSON Protobuf Encoding"): lowerCamelCase keys, trace and span ids
as hex (OTLP's one deviation from the proto3 JSON mapping), enums as integers, 64-bit
integers as decimal strings, ``resourceSpans[].scopeSpans[].spans[]``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field

# Span.SpanKind
INTERNAL, SERVER, CLIENT = 1, 2, 3
# Status.StatusCode
UNSET, OK, ERROR = 0, 1, 2
# SpanFlags: bit 8 says whether the parent is remote is known, bit 9 that it is
_HAS_IS_REMOTE, _IS_REMOTE = 0x100, 0x200
CONTENT_TYPE = "application/json"

Value = str | bool | int | float


@dataclass(frozen=True)
class Span:
    """One finished span: its ids, what it was, when (Unix nanoseconds), its attributes and
    status; ``remote_parent``: the parent came from another process's header."""

    trace_id: str
    span_id: str
    parent_id: str
    name: str
    kind: int
    start_ns: int
    end_ns: int
    attributes: Mapping[str, Value] = field(default_factory=dict)
    status: int = UNSET
    message: str = ""
    trace_flags: int = 1
    trace_state: str = ""
    remote_parent: bool = False


def any_value(value: Value) -> dict[str, Value]:
    """An attribute value as ``AnyValue`` (a bool before an int: Python's bool is one)."""
    if isinstance(value, bool):
        return {"boolValue": value}
    if isinstance(value, int):
        return {"intValue": str(value)}
    if isinstance(value, float):
        return {"doubleValue": value}
    return {"stringValue": str(value)}


def key_values(attributes: Mapping[str, Value]) -> list[dict[str, object]]:
    return [{"key": k, "value": any_value(v)} for k, v in attributes.items()]


def span_json(span: Span) -> dict[str, object]:
    """One ``Span`` message."""
    flags = (span.trace_flags & 0xFF) | _HAS_IS_REMOTE | (_IS_REMOTE if span.remote_parent else 0)
    out: dict[str, object] = {
        "traceId": span.trace_id,
        "spanId": span.span_id,
        "flags": flags,
        "name": span.name,
        "kind": span.kind,
        "startTimeUnixNano": str(span.start_ns),
        "endTimeUnixNano": str(span.end_ns),
        "attributes": key_values(span.attributes),
        "status": {"code": span.status, **({"message": span.message} if span.message else {})},
    }
    if span.parent_id:
        out["parentSpanId"] = span.parent_id
    if span.trace_state:
        out["traceState"] = span.trace_state
    return out


def export_request(
    spans: Sequence[Span], resource: Mapping[str, Value], scope: str, version: str
) -> dict[str, object]:
    """The body of one POST to ``/v1/traces``: every span under one resource (this
    process: ``service.name`` and the like) and one instrumentation scope."""
    return {
        "resourceSpans": [
            {
                "resource": {"attributes": key_values(resource)},
                "scopeSpans": [
                    {
                        "scope": {"name": scope, "version": version},
                        "spans": [span_json(s) for s in spans],
                    }
                ],
            }
        ]
    }


@dataclass(frozen=True)
class Settings:
    """Where and how spans are exported, as the OpenTelemetry SDK environment variables
    say (opentelemetry-specification v1.60.0: configuration/sdk-environment-variables.md,
    protocol/exporter.md). ``endpoint`` empty: export nothing (the default)."""

    endpoint: str = ""
    service: str = ""
    ratio: float = 1.0  # of the traces this process starts (a caller's decision is kept)
    max_queue: int = 2048  # OTEL_BSP_MAX_QUEUE_SIZE
    batch: int = 512  # OTEL_BSP_MAX_EXPORT_BATCH_SIZE
    delay_s: float = 5.0  # OTEL_BSP_SCHEDULE_DELAY
    timeout_s: float = 10.0  # OTEL_EXPORTER_OTLP_TRACES_TIMEOUT


def traces_url(env: Mapping[str, str]) -> str:
    """The traces URL: the per-signal variable as it is, else the base one with
    ``v1/traces`` appended (the exporter spec's "Endpoint URLs for OTLP/HTTP")."""
    url = env.get("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", "").strip()
    if url:
        return url
    base = env.get("OTEL_EXPORTER_OTLP_ENDPOINT", "").strip()
    if not base:
        return ""
    return base.rstrip("/") + "/v1/traces"


def ratio_of(env: Mapping[str, str]) -> float:
    """The share of new traces kept: ``always_off`` 0, the ``traceidratio`` samplers
    their ``OTEL_TRACES_SAMPLER_ARG`` (a bad one is ignored, as the spec says: 1.0),
    anything else 1.0."""
    sampler = env.get("OTEL_TRACES_SAMPLER", "parentbased_always_on")
    if sampler in ("always_off", "parentbased_always_off"):
        return 0.0
    if sampler not in ("traceidratio", "parentbased_traceidratio"):
        return 1.0
    try:
        arg = float(env.get("OTEL_TRACES_SAMPLER_ARG", "1.0"))
    except ValueError:
        return 1.0
    return arg if 0.0 <= arg <= 1.0 else 1.0


def settings_of(env: Mapping[str, str], endpoint: str = "", service: str = "") -> Settings:
    """The settings ``env`` gives, ``endpoint`` (a flag) before the variables."""

    def number(name: str, default: float, scale: float = 1.0) -> float:
        try:
            value = float(env.get(name, "")) / scale
        except ValueError:
            return default
        return value if value > 0 else default

    return Settings(
        endpoint=endpoint or traces_url(env),
        service=env.get("OTEL_SERVICE_NAME", "") or service,
        ratio=ratio_of(env),
        max_queue=int(number("OTEL_BSP_MAX_QUEUE_SIZE", 2048)),
        batch=int(number("OTEL_BSP_MAX_EXPORT_BATCH_SIZE", 512)),
        delay_s=number("OTEL_BSP_SCHEDULE_DELAY", 5.0, 1000.0),
        timeout_s=number("OTEL_EXPORTER_OTLP_TRACES_TIMEOUT", 10.0, 1000.0),
    )
