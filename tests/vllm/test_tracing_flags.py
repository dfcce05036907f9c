"""``spec.tracing`` on a vLLM deployment, judged by vLLM 0.32 itself: its CLI parser reads
the rendered --otlp-traces-endpoint and --collect-detailed-traces into EngineArgs, and the
env picks the OTLP exporter vLLM's tracing module builds for an HTTP URL."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from disagg_operator.engines.vllm import contract as vllm
from disagg_operator.render.objects import render

pytestmark = pytest.mark.vllm

ROOT = Path(__file__).resolve().parents[2]
URL = "http://otel-collector.observability:4318/v1/traces"


def _pods(tracing: dict[str, Any]) -> list[dict[str, Any]]:
    body: dict[str, Any] = yaml.safe_load((ROOT / "examples" / "vllm-cpu.yaml").read_text())
    body["metadata"].update(namespace="default", uid="u")
    body["spec"]["tracing"] = tracing
    return [o for o in render(body, hmac_key="k") if o["kind"] == "Pod"]


@pytest.mark.parametrize("detail", [None, ["model"], ["model", "worker"], ["all"]])
def test_vllm_parses_the_rendered_tracing_flags(serve_parser: Any, detail: Any) -> None:
    pods = _pods({"endpoint": URL, "samplingRatio": 0.25, "vllmDetailedTraces": detail})
    assert {p["metadata"]["labels"]["disagg.dev/role"] for p in pods} == {"prefill", "decode"}
    for pod in pods:
        c = pod["spec"]["containers"][0]
        _, engine_args = serve_parser.parse([*c["command"], *c.get("args", [])])
        assert engine_args.otlp_traces_endpoint == URL
        assert engine_args.collect_detailed_traces == detail
        env = {e["name"]: e.get("value") for e in c["env"]}
        assert env[vllm.OTLP_PROTOCOL_ENV] == vllm.OTLP_HTTP_PROTOBUF
        role = pod["metadata"]["labels"]["disagg.dev/role"]
        assert env["OTEL_SERVICE_NAME"] == f"vllm-{role}"
        assert (env["OTEL_TRACES_SAMPLER"], env["OTEL_TRACES_SAMPLER_ARG"]) == (
            "parentbased_traceidratio", "0.25")  # fmt: skip


def test_vllm_builds_an_http_exporter_for_the_rendered_protocol(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """vllm/tracing/otel.py get_span_exporter with the rendered protocol: OTLP/HTTP."""
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from vllm.tracing.otel import get_span_exporter

    monkeypatch.setenv(vllm.OTLP_PROTOCOL_ENV, vllm.OTLP_HTTP_PROTOBUF)
    assert isinstance(get_span_exporter(URL), OTLPSpanExporter)
