"""One trace per request, as an OTLP receiver gets it: a P/D request through a real proxy
to real prefill and decode worker processes (real NIXL on loopback) arrives as one trace
under the client's ``traceparent``: router, route, hops, both workers' server spans and the
decode's KV transfer, each under the right parent. An invalid ``traceparent`` starts a
new trace; a dead collector costs spans, never a request's time."""

from __future__ import annotations

import asyncio
import json
import socket
import time
import urllib.request
from collections.abc import Iterator
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

from disagg_worker.model.model import BOS
from disagg_worker.serve.rules.otlp import CLIENT, INTERNAL, SERVER, Settings, Span
from disagg_worker.serve.tracing import Exporter
from tests.support.otlp import Received, Receiver, tree
from tests.worker.serve.conftest import Workers, wait_until

TRACE = "4bf92f3577b34da6a3ce929d0e0e4736"
CALLER = "00f067aa0ba902b7"


class Stack:
    def __init__(self, receiver: Receiver, proxy: str) -> None:
        self.receiver, self.proxy = receiver, proxy


@pytest.fixture(scope="module")
def stack(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Stack]:
    with Receiver() as receiver, pytest.MonkeyPatch.context() as env:
        env.setenv("OTEL_EXPORTER_OTLP_TRACES_ENDPOINT", receiver.url)
        env.setenv("OTEL_BSP_SCHEDULE_DELAY", "50")  # ms: the test waits less
        group = Workers(tmp_path_factory.mktemp("traced"))
        try:
            p, d = group.spawn("prefill", num_blocks=32), group.spawn("decode", num_blocks=32)
            group.ready(p, d)
            proxy = group.proxy([p.url], [d.url], "--otlp-traces-endpoint", receiver.url)
            yield Stack(receiver, proxy)
        finally:
            group.stop()


def _send(url: str, headers: dict[str, str], stream: bool = False) -> dict[str, Any]:
    body = {"prompt": [BOS, *range(40, 90)], "max_tokens": 3, "ignore_eos": True,
            "stream": stream}  # fmt: skip
    req = urllib.request.Request(
        url + "/v1/completions", json.dumps(body).encode(),
        {"Content-Type": "application/json", **headers},
    )  # fmt: skip
    with urllib.request.urlopen(req, timeout=60) as resp:
        if stream:
            assert resp.headers["X-Disagg-Path"] == "pd"
            assert resp.read().endswith(b"data: [DONE]\n\n")
            return {}
        out: dict[str, Any] = json.load(resp)
    assert out["disagg"]["proxy"]["path"] == "pd", out
    return out


def _trace(receiver: Receiver, trace_id: str, count: int) -> list[Received]:
    def arrived() -> list[Received]:
        return [s for s in receiver.spans if s.trace_id == trace_id]

    wait_until(lambda: len(arrived()) >= count, 30, f"{count} spans of trace {trace_id}")
    time.sleep(0.2)  # nothing more is coming
    return arrived()


def _one(spans: list[Received], service: str, name: str) -> Received:
    found = [s for s in spans if (s.service, s.name) == (service, name)]
    assert len(found) == 1, (service, name, tree(spans))
    return found[0]


def _check_tree(spans: list[Received], caller: str) -> None:
    """Router → route, prefill hop, decode hop; each hop → its worker's server span; the
    decode's → its KV transfer. ``caller``: the router span's parent ("" for a root)."""
    assert len(spans) == 7, tree(spans)
    router = _one(spans, "disagg-router", "POST /v1/completions")
    route = _one(spans, "disagg-router", "route")
    hop_p = _one(spans, "disagg-router", "prefill hop")
    hop_d = _one(spans, "disagg-router", "decode hop")
    prefill = _one(spans, "disagg-prefill", "POST /v1/completions")
    decode = _one(spans, "disagg-decode", "POST /v1/completions")
    kv = _one(spans, "disagg-decode", "kv_transfer")
    assert router.parent_id == caller
    parents = [(route, router), (hop_p, router), (hop_d, router), (prefill, hop_p),
               (decode, hop_d), (kv, decode)]  # fmt: skip
    for child, parent in parents:
        assert child.parent_id == parent.span_id, (child.name, tree(spans))
    kinds = [router.kind, route.kind, hop_p.kind, hop_d.kind, prefill.kind, decode.kind, kv.kind]
    assert kinds == [SERVER, INTERNAL, CLIENT, CLIENT, SERVER, SERVER, INTERNAL]
    assert route.attributes["disagg.route.path"] == "pd"
    assert hop_p.attributes["server.address"] == "127.0.0.1"
    assert hop_p.attributes["url.full"] == prefill_url(hop_p)
    assert [s.attributes["http.response.status_code"] for s in (router, prefill, decode)] == [
        200, 200, 200]  # fmt: skip
    a = kv.attributes
    assert a["disagg.kv_transfer.bytes"] > 0 and a["disagg.kv_transfer.descriptors"] > 0
    assert 0 < a["disagg.kv_transfer.seconds"] < 30
    assert (a["disagg.kv_transfer.path"], a["disagg.kv_transfer.backends"]) == ("read", "UCX")


def prefill_url(hop: Received) -> str:
    return f"http://127.0.0.1:{hop.attributes['server.port']}/v1/completions"


def test_one_trace_holds_router_prefill_decode_and_kv_transfer(stack: Stack) -> None:
    tracestate = "congo=t61rcWkgMzE"
    _send(stack.proxy, {"traceparent": f"00-{TRACE}-{CALLER}-01", "tracestate": tracestate})
    spans = _trace(stack.receiver, TRACE, 7)
    print("\n" + tree(spans))
    _check_tree(spans, CALLER)
    # the caller's tracestate, passed on unchanged to every hop and worker
    assert {s.state for s in spans} == {tracestate}
    assert stack.receiver.content_types and set(stack.receiver.content_types) == {
        "application/json"}  # fmt: skip
    assert stack.receiver.errors == []


def test_an_invalid_traceparent_starts_a_new_trace(stack: Stack) -> None:
    """All-zero trace id (W3C: invalid): answered 200 all the same, under a new trace that
    still reaches both workers."""
    before = {s.trace_id for s in stack.receiver.spans}
    _send(stack.proxy, {"traceparent": f"00-{'0' * 32}-{CALLER}-01", "tracestate": "a=b"})

    def fresh() -> set[str]:
        return {s.trace_id for s in stack.receiver.spans} - before

    wait_until(lambda: len(fresh()) == 1, 30, "a new trace")
    (trace_id,) = fresh()
    spans = _trace(stack.receiver, trace_id, 7)
    _check_tree(spans, "")
    assert trace_id != "0" * 32
    assert {s.state for s in spans} == {""}  # tracestate goes only with its traceparent


def test_a_stream_is_one_trace_too(stack: Stack) -> None:
    """A streamed answer: the same tree (the worker's server span lasts the whole stream;
    the router's decode hop span ends at decode's response head)."""
    trace = "0af7651916cd43dd8448eb211c80319c"
    _send(stack.proxy, {"traceparent": f"00-{trace}-{CALLER}-01"}, stream=True)
    _check_tree(_trace(stack.receiver, trace, 7), CALLER)


def test_an_unsampled_caller_is_passed_on_and_recorded_nowhere(stack: Stack) -> None:
    """Flags 00: the caller recorded nothing, so neither does any hop (ParentBased), as the
    transfer canary's hops rely on; a sampled request after it still arrives whole."""
    unsampled, after = "1" * 32, "2" * 32
    _send(stack.proxy, {"traceparent": f"00-{unsampled}-{CALLER}-00"})
    _send(stack.proxy, {"traceparent": f"00-{after}-{CALLER}-01"})
    _trace(stack.receiver, after, 7)  # exported after the unsampled request's would be
    assert [s for s in stack.receiver.spans if s.trace_id == unsampled] == []


def test_a_dead_collector_costs_spans_not_time() -> None:
    """A collector that takes the connection and never answers: adding spans never waits,
    what the queue cannot hold is dropped and counted, the export fails within its
    timeout."""
    listener = socket.socket()
    listener.bind(("127.0.0.1", 0))
    listener.listen(16)  # accepted by the kernel, never answered
    url = f"http://127.0.0.1:{listener.getsockname()[1]}/v1/traces"
    span = Span(TRACE, CALLER, "", "s", INTERNAL, 1, 2)

    async def run() -> tuple[float, Exporter]:
        registry = CollectorRegistry()
        exporter = Exporter(Settings(url, max_queue=100, batch=10, delay_s=0.01,
                                     timeout_s=0.5), registry)  # fmt: skip
        await exporter.start()
        await asyncio.sleep(0.05)
        began = time.perf_counter()
        for _ in range(10_000):
            exporter.add(span)
        took = time.perf_counter() - began
        await asyncio.sleep(1.0)  # the first batch's POST times out meanwhile
        await exporter.close()
        return took, exporter

    try:
        took, exporter = asyncio.run(run())
    finally:
        listener.close()
    assert took < 0.5, f"adding 10000 spans took {took:.3f}s"
    dropped = {s.labels["reason"]: s.value for m in exporter.dropped.collect()
               for s in m.samples if s.name.endswith("_total")}  # fmt: skip
    assert dropped["queue_full"] >= 10_000 - 100
    assert dropped["export_failed"] >= 10
    assert exporter.exported._value.get() == 0


class _LosesCancels(Exporter):
    """An exporter whose POST ends as a failed export when cancelled, as aiohttp's does on
    Python 3.10 when its own timeout fires with the cancel (its timer turns the
    CancelledError into the TimeoutError the exporter counts): the cancel is lost."""

    lose = True

    async def _send(self, batch: list[Span]) -> None:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            if not self.lose:
                raise


def test_closing_ends_the_export_loop_even_when_its_cancel_is_lost() -> None:
    span = Span(TRACE, CALLER, "", "s", INTERNAL, 1, 2)

    async def run() -> bool:
        exporter = _LosesCancels(Settings("http://127.0.0.1:9/v1/traces", max_queue=100,
                                          batch=1, delay_s=0.01, timeout_s=0.2))  # fmt: skip
        await exporter.start()
        for _ in range(3):
            exporter.add(span)
        await asyncio.sleep(0.02)  # the loop is inside a POST
        closing = asyncio.ensure_future(exporter.close())
        done, _ = await asyncio.wait({closing}, timeout=5)
        if not done:  # the loop ran on: stop it for good before failing
            assert exporter._task is not None
            exporter.lose = False
            exporter._task.cancel()
            await asyncio.wait({closing}, timeout=5)
        return bool(done)

    assert asyncio.run(run()), "close() waited on an export loop that never stopped"
