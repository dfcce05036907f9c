"""What the exporter sends decodes with opentelemetry-proto's ExportTraceServiceRequest
(hex ids, lowerCamelCase keys, integer enums, 64-bit integers as strings), and the
settings come from the OpenTelemetry SDK variables as the specification says."""

from __future__ import annotations

import json

import pytest

from disagg_worker.serve.rules import otlp
from tests.support.otlp import decode

TRACE, SPAN, PARENT = "4bf92f3577b34da6a3ce929d0e0e4736", "00f067aa0ba902b7", "b7ad6b7169203331"


def _span(**kw: object) -> otlp.Span:
    base: dict[str, object] = dict(
        trace_id=TRACE, span_id=SPAN, parent_id=PARENT, name="POST /v1/completions",
        kind=otlp.SERVER, start_ns=1_700_000_000_123_456_789, end_ns=1_700_000_000_223_456_789,
        attributes={"http.response.status_code": 200, "disagg.kv_transfer.seconds": 0.0023,
                    "disagg.hop": "decode", "disagg.kv_transfer.pushed": False},
        trace_state="congo=t61rcWkgMzE", remote_parent=True,
    )  # fmt: skip
    base.update(kw)
    return otlp.Span(**base)  # type: ignore[arg-type]


def test_export_request_decodes_with_the_collectors_classes() -> None:
    root = _span(span_id="1" * 16, parent_id="", status=2, message="boom")
    body = otlp.export_request([_span(), root], {"service.name": "disagg-decode"}, "disagg", "1")
    message = decode(json.dumps(body).encode())
    (rs,) = message.resource_spans
    assert rs.resource.attributes[0].value.string_value == "disagg-decode"
    first, root = rs.scope_spans[0].spans
    assert first.trace_id.hex() == TRACE and first.span_id.hex() == SPAN
    assert first.parent_span_id.hex() == PARENT and root.parent_span_id == b""
    assert first.kind == first.SPAN_KIND_SERVER
    assert first.start_time_unix_nano == 1_700_000_000_123_456_789
    assert first.trace_state == "congo=t61rcWkgMzE"
    assert first.flags == 0x301  # sampled, parent known remote
    values = {a.key: a.value for a in first.attributes}
    assert values["http.response.status_code"].int_value == 200
    assert values["disagg.kv_transfer.seconds"].double_value == 0.0023
    assert values["disagg.kv_transfer.pushed"].HasField("bool_value")
    assert (root.status.code, root.status.message) == (root.status.STATUS_CODE_ERROR, "boom")


def test_the_decoder_is_as_strict_as_a_collector() -> None:
    """Base64 ids (the plain proto3 mapping) or an unknown field are refused."""
    body = otlp.export_request([_span()], {}, "disagg", "1")
    span = body["resourceSpans"][0]["scopeSpans"][0]["spans"][0]  # type: ignore[index]
    with pytest.raises(ValueError):
        decode(json.dumps({**body, "resourceSpans": [{"scopeSpans": [{"spans": [
            {**span, "traceId": "S/kvNXezTaajzpKdDg5HNg=="}]}]}]}).encode())  # fmt: skip
    with pytest.raises(Exception, match="nope"):
        decode(json.dumps({**body, "nope": 1}).encode())


@pytest.mark.parametrize(
    ("env", "url"),
    [  # protocol/exporter.md, "Endpoint URLs for OTLP/HTTP", examples 1-3
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318"},
         "http://collector:4318/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://collector:4318"},
         "http://collector:4318"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://collector:4318/mycollector/"},
         "http://collector:4318/mycollector/v1/traces"),
        ({"OTEL_EXPORTER_OTLP_ENDPOINT": "http://a:4318",
          "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://b:4318/v1/traces"},
         "http://b:4318/v1/traces"),
        ({}, ""),
    ],
)  # fmt: skip
def test_traces_url(env: dict[str, str], url: str) -> None:
    assert otlp.traces_url(env) == url


def test_settings_from_the_sdk_variables() -> None:
    env = {"OTEL_TRACES_SAMPLER": "parentbased_traceidratio", "OTEL_TRACES_SAMPLER_ARG": "0.25",
           "OTEL_BSP_SCHEDULE_DELAY": "100", "OTEL_SERVICE_NAME": "router",
           "OTEL_EXPORTER_OTLP_TRACES_ENDPOINT": "http://env/v1/traces"}  # fmt: skip
    got = otlp.settings_of(env, endpoint="http://flag/v1/traces", service="disagg-proxy")
    assert (got.endpoint, got.service, got.ratio, got.delay_s) == (
        "http://flag/v1/traces", "router", 0.25, 0.1)  # fmt: skip
    assert otlp.settings_of({}, service="s") == otlp.Settings(service="s")
    # an invalid sampler argument is ignored (sdk-environment-variables.md): 1.0
    assert otlp.ratio_of({"OTEL_TRACES_SAMPLER": "traceidratio",
                          "OTEL_TRACES_SAMPLER_ARG": "2"}) == 1.0  # fmt: skip
    assert otlp.ratio_of({"OTEL_TRACES_SAMPLER": "always_off"}) == 0.0
