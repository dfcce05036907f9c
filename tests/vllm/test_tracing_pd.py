"""One trace per P/D request through real vLLM: examples/vllm-cpu.yaml with ``spec.tracing``
naming a real OTLP receiver, its pods run as rendered (vLLM's --otlp-traces-endpoint and
OTLP/HTTP protobuf env) and the router with the flags and sampler the operator renders for
its Deployment. A request with a client's ``traceparent`` arrives as one trace: the router's
spans, and the prefill's and decode's own ``llm_request`` spans, each under the hop that
reached it.

The engines are a pair of their own: the shared P/D stack (conftest ``pd_stack``) has no
``spec.tracing``, and vLLM reads its tracing flags only at start.
"""

from __future__ import annotations

import json
import time
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from opentelemetry.proto.trace.v1.trace_pb2 import Span as ProtoSpan

from disagg_operator.engines.vllm import contract as vllm
from disagg_tools.local.children import Child
from tests.support.otlp import PROTOBUF, Received, Receiver, tree

from .conftest import MAX_TOKENS, Stack, _manifest, launched, prompts

pytestmark = [pytest.mark.vllm, pytest.mark.timeout(900)]

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"
SERVER, CLIENT = ProtoSpan.SPAN_KIND_SERVER, ProtoSpan.SPAN_KIND_CLIENT
# Every exporter here (vLLM's BatchSpanProcessor, the router's) sends within 0.2 s, not 5.
BSP_DELAY_MS = "200"
# The collector on this host, where the pods reach it: 127.0.0.1 is each pod's own address
# in a local run, as in a cluster (docs/local-run.md)
COLLECTOR_HOST = "127.0.0.2"


@dataclass
class Traced:
    receiver: Receiver
    stack: Stack
    pids: dict[str, int]  # role → the vLLM server's process id


def _engine(stack: Stack, role: str) -> Child:
    return stack.run.engines[stack.run.names[stack.url(role)]]


@pytest.fixture(scope="module")
def traced(tiny_llama: Path, tmp_path_factory: pytest.TempPathFactory) -> Iterator[Traced]:
    tmp = tmp_path_factory.mktemp("traced-pd")
    with Receiver(COLLECTOR_HOST) as receiver, pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", BSP_DELAY_MS)
        body = _manifest(tiny_llama)
        body["spec"]["tracing"] = {"endpoint": receiver.url}
        run = launched(body, tmp)
        stack = next(run)
        try:  # the proxy runs with the router Deployment's tracing flags and sampler
            pids = {r: _engine(stack, r).proc.pid for r in ("prefill", "decode")}
            yield Traced(receiver, stack, pids)
        finally:
            run.close()


def _send(proxy: str, prompt: list[int], traceparent: str) -> tuple[str, str]:
    """The route's path and the request id the router gave both hops."""
    body = {"prompt": prompt, "max_tokens": MAX_TOKENS, "temperature": 0}
    req = urllib.request.Request(
        proxy + "/v1/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json", "traceparent": traceparent},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=300) as resp:
        return str(json.load(resp)["disagg"]["proxy"]["path"]), resp.headers["X-Request-Id"]


def _trace(receiver: Receiver, trace_id: str, count: int, timeout_s: float) -> list[Received]:
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        got = [s for s in receiver.spans if s.trace_id == trace_id]
        if len(got) >= count:
            time.sleep(1.0)  # any span still on its way
            return [s for s in receiver.spans if s.trace_id == trace_id]
        time.sleep(0.1)
    got = [s for s in receiver.spans if s.trace_id == trace_id]
    raise AssertionError(f"{len(got)} of {count} spans of {trace_id}:\n{tree(got)}")


def _one(spans: list[Received], name: str, parent: Received | None = None) -> Received:
    found = [
        s for s in spans if s.name == name and (parent is None or s.parent_id == parent.span_id)
    ]
    assert len(found) == 1, (name, tree(spans))
    return found[0]


def test_the_engines_run_the_rendered_tracing_flags(traced: Traced) -> None:
    for role in ("prefill", "decode"):
        child = _engine(traced.stack, role)
        flag = child.argv.index(vllm.OTLP_TRACES_FLAG)
        assert child.argv[flag + 1] == traced.receiver.url
        assert child.env[vllm.OTLP_PROTOCOL_ENV] == vllm.OTLP_HTTP_PROTOBUF


def test_one_trace_holds_router_prefill_and_decode_vllm(traced: Traced) -> None:
    path, rid = _send(traced.stack.proxy, prompts()[3], f"00-{TRACE}-{CALLER}-01")
    assert path == "pd"
    spans = _trace(traced.receiver, TRACE, 6, timeout_s=60)
    print("\n" + tree(spans))
    assert len(spans) == 6, tree(spans)
    root = _one(spans, "POST /v1/completions")
    assert (root.service, root.parent_id, root.kind) == ("disagg-router", CALLER, SERVER)
    assert _one(spans, "route", root).attributes["disagg.route.path"] == "pd"
    for role in ("prefill", "decode"):
        hop = _one(spans, f"{role} hop", root)
        assert (hop.service, hop.kind) == ("disagg-router", CLIENT)
        engine = _one(spans, "llm_request", hop)
        assert engine.kind == SERVER
        print(f"{role} llm_request resource: {engine.resource}")
        assert engine.resource["vllm.process_id"] == str(traced.pids[role]), role
        assert engine.service == f"vllm-{role}"  # the rendered OTEL_SERVICE_NAME
        a = engine.attributes
        assert a["gen_ai.request.id"] == f"cmpl-{rid}-0"  # vLLM's id: X-Request-Id, prompt 0
        assert a["gen_ai.usage.prompt_tokens"] == len(prompts()[3])
        assert a["gen_ai.usage.completion_tokens"] == (1 if role == "prefill" else MAX_TOKENS)
    assert set(traced.receiver.content_types) <= {"application/json", PROTOBUF}
    assert PROTOBUF in traced.receiver.content_types and not traced.receiver.errors


@pytest.mark.parametrize("compression", ["none", "gzip", "deflate"])
def test_the_receiver_takes_what_vllms_exporter_sends(compression: str) -> None:
    """OpenTelemetry's OTLP/HTTP exporter, as vLLM builds it, compressed as
    OTEL_EXPORTER_OTLP_COMPRESSION may ask: the span arrives whole."""
    from opentelemetry.exporter.otlp.proto.http import Compression
    from opentelemetry.exporter.otlp.proto.http.trace_exporter import OTLPSpanExporter
    from opentelemetry.sdk.resources import Resource
    from opentelemetry.sdk.trace import TracerProvider
    from opentelemetry.sdk.trace.export import SimpleSpanProcessor

    with Receiver() as receiver:
        exporter = OTLPSpanExporter(receiver.url, compression=Compression(compression))
        provider = TracerProvider(resource=Resource.create({"service.name": "vllm"}))
        provider.add_span_processor(SimpleSpanProcessor(exporter))
        with provider.get_tracer("t").start_as_current_span("llm_request") as span:
            span.set_attribute("gen_ai.usage.prompt_tokens", 7)
        provider.shutdown()
    assert receiver.content_types == [PROTOBUF] and not receiver.errors
    assert receiver.encodings == ["" if compression == "none" else compression]
    (got,) = receiver.spans
    assert (got.service, got.name, got.attributes) == (
        "vllm", "llm_request", {"gen_ai.usage.prompt_tokens": 7})  # fmt: skip
    assert got.trace_id == format(span.get_span_context().trace_id, "032x")
