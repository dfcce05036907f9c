"""The P/D proxy speaks vLLM's protocol: verified against in-process HTTP stubs shaped like
`vllm serve` with the NixlConnector (what they receive, what the client gets back), and
every failure names its hop."""

from __future__ import annotations

import asyncio
import json
import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve.proxy.app import build_app
from disagg_worker.serve.proxy.config import ProxyConfig
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.hops import route_of
from disagg_worker.serve.proxy.rules.routing import Policy
from disagg_worker.serve.proxy.upstream import Pool
from disagg_worker.serve.rules.openai import RELEASE_PATH

VLLM_PARAMS = {
    "do_remote_prefill": True,
    "do_remote_decode": False,
    "remote_block_ids": [3, 4],
    "remote_engine_id": "e1",
    "remote_host": "10.0.0.1",
    "remote_port": 5600,
    "remote_request_id": "cmpl-x",
    "tp_size": 1,
}


def _stub(seen: list[dict[str, Any]], answer: Callable[[dict[str, Any]], Any]) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        body = await request.json()
        seen.append(
            {
                "path": request.path,
                "body": body,
                "request_id": request.headers.get("X-Request-Id"),
                "auth": request.headers.get("Authorization"),
            }
        )
        if request.path == RELEASE_PATH:  # our prefill's early release; vLLM has none
            return web.json_response({"released": True})
        result = answer(body)
        if asyncio.iscoroutine(result):
            result = await result
        if callable(result):  # a streaming answer writes its own response
            return await result(request)  # type: ignore[no-any-return]
        status, data = result
        return web.json_response(data, status=status)

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    app.router.add_post("/v1/chat/completions", handler)
    app.router.add_post(RELEASE_PATH, handler)
    return app


async def _serve(app: web.Application) -> TestServer:
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    return server


def _prefill_ok(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"choices": [{"text": "a"}], "kv_transfer_params": VLLM_PARAMS}


def _decode_ok(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    return 200, {"choices": [{"text": "abc"}], "kv_transfer_params": None}


@pytest.fixture
async def stack() -> AsyncIterator[Callable[..., Any]]:
    servers: list[TestServer] = []
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def make(prefill: Any, decode: Any, **kw: Any) -> tuple[Any, list[Any], list[Any]]:
        """Stub workers answering with ``prefill`` / ``decode`` (a list: one stub each, in
        the pool's order; a string: a URL nobody listens on) behind a real proxy."""
        seen_p: list[dict[str, Any]] = []
        seen_d: list[dict[str, Any]] = []
        pools: list[list[str]] = [[], []]
        for urls, seen, answers in ((pools[0], seen_p, prefill), (pools[1], seen_d, decode)):
            for answer in answers if isinstance(answers, list) else [answers]:
                if isinstance(answer, str):
                    urls.append(answer)
                    continue
                srv = await _serve(_stub(seen, answer))
                servers.append(srv)
                urls.append(str(srv.make_url("")))
        # served as `disagg proxy` serves it: a handler whose client leaves is cancelled
        app = build_app(Proxy(pools[0], pools[1], ProxyConfig(**kw)))
        runner = web.AppRunner(app, handler_cancellation=True)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        port = runner.addresses[0][1]
        session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{port}")
        sessions.append(session)
        return session, seen_p, seen_d

    yield make
    for s in sessions:
        await s.close()
    for runner in runners:
        await runner.cleanup()
    for srv in servers:
        await srv.close()


async def test_proxy_sends_vllm_fields_to_both_hops(stack: Any) -> None:
    client, seen_p, seen_d = await stack(_prefill_ok, _decode_ok)
    body = {"model": "m", "prompt": "hi", "max_tokens": 9, "min_tokens": 2, "temperature": 0}
    auth = {"Authorization": "Bearer k"}
    async with client.post("/v1/completions", json=body, headers=auth) as resp:
        assert resp.status == 200
        out = await resp.json()
    pre, dec = seen_p[0]["body"], seen_d[0]["body"]
    assert pre["max_tokens"] == 1 and pre["stream"] is False and "min_tokens" not in pre
    assert pre["kv_transfer_params"] == {
        "do_remote_decode": True,
        "do_remote_prefill": False,
        "remote_engine_id": None,
        "remote_block_ids": None,
        "remote_host": None,
        "remote_port": None,
    }
    assert dec == {**body, "kv_transfer_params": VLLM_PARAMS}
    assert seen_p[0]["request_id"] == seen_d[0]["request_id"]
    assert seen_p[0]["auth"] == seen_d[0]["auth"] == "Bearer k"
    assert out["choices"][0]["text"] == "abc"
    assert out["disagg"]["proxy"]["total_ms"] >= out["disagg"]["proxy"]["decode_hop_ms"]


async def test_prefill_down_names_the_hop_and_the_cause(stack: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    client, _, seen_d = await stack(dead, _decode_ok)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 502
        message = (await resp.json())["error"]["message"]
    assert message.startswith(f"prefill {dead}/v1/completions: cannot connect")
    assert not seen_d


async def test_decode_failure_relays_the_workers_message(stack: Any) -> None:
    def decode_fails(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 502, {"error": {"message": "KV transfer from prefill e1 failed: refused"}}

    client, _, _ = await stack(_prefill_ok, decode_fails)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 502
        message = (await resp.json())["error"]["message"]
    assert "decode http://127.0.0.1:" in message
    assert message.endswith("answered 502: KV transfer from prefill e1 failed: refused")


async def test_bad_request_passes_through_flat_as_the_workers_error(stack: Any) -> None:
    """A worker's client error reaches the client as the worker gave it (message, type,
    param): not wrapped in the hop's words with its field lost."""
    said = "Input length (5000) exceeds model's maximum context length (4096)."
    error = {"message": said, "type": "BadRequestError", "param": "prompt", "code": 400}
    # vLLM 0.32's ErrorResponse (serve/engine/protocol.py: ErrorInfo); its older flat shape
    refusals = [{"error": error}, {"object": "error", **error}]
    for answer in refusals:
        client, _, seen_d = await stack(lambda body, a=answer: (400, a), _decode_ok)
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            assert resp.status == 400
            got = (await resp.json())["error"]
        assert got == error
        assert not seen_d


async def test_relayed_worker_messages_are_bounded(stack: Any) -> None:
    """A worker's message (any of its shapes) is quoted cut to its bound, so the proxy's
    answer stays small whatever a worker or a client put in it."""
    answers = [
        {"error": {"message": "m" * 100_000}},  # ours and OpenAI's
        {"object": "error", "message": "m" * 100_000},  # vLLM's
        {"error": "m" * 100_000},
        ["m" * 100_000],  # not an error object at all
    ]
    for answer in answers:
        client, _, _ = await stack(lambda body, a=answer: (400, a), _decode_ok)
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            assert resp.status == 400
            raw = await resp.read()
        error = json.loads(raw)["error"]
        assert len(raw) < 1200 and len(error["message"]) <= 1000, error
        assert error["message"].endswith(" characters)") and "mmmm" in error["message"]
        assert set(error) == {"message", "type", "param", "code"}


async def test_one_deadline_covers_both_hops(stack: Any) -> None:
    async def slow(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        await asyncio.sleep(5)
        return _decode_ok(body)

    client, _, _ = await stack(_prefill_ok, slow, timeout_s=0.5)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 504
        message = (await resp.json())["error"]["message"]
    assert "decode" in message and "no answer within the 0.5s deadline" in message


async def test_stream_passes_decode_chunks_through_as_they_come(stack: Any) -> None:
    """Decode writes its second chunk only after the client has read the first: a proxy
    that buffered the stream would deadlock here (and time out)."""
    first_read = asyncio.Event()

    def decode_streams(body: dict[str, Any]) -> Any:
        async def write(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices": [{"text": "a"}]}\n\n')
            await asyncio.wait_for(first_read.wait(), 5)
            await resp.write(b'data: {"choices": [{"text": "b"}]}\n\ndata: [DONE]\n\n')
            return resp

        return write

    client, seen_p, seen_d = await stack(_prefill_ok, decode_streams)
    body = {"prompt": "x", "stream": True, "stream_options": {"include_usage": True}}
    lines = []
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        async for raw in resp.content:
            line = raw.decode().strip()
            if line:
                lines.append(line)
                first_read.set()
    assert lines == [
        'data: {"choices": [{"text": "a"}]}',
        'data: {"choices": [{"text": "b"}]}',
        "data: [DONE]",
    ]
    pre, dec = seen_p[0]["body"], seen_d[0]["body"]
    assert pre["stream"] is False and "stream_options" not in pre
    assert dec["stream"] is True and dec["stream_options"] == {"include_usage": True}


def _decode_streams(body: dict[str, Any]) -> Any:
    async def write(request: web.Request) -> web.StreamResponse:
        resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
        await resp.prepare(request)
        await resp.write(b'data: {"choices": [{"text": "a"}]}\n\ndata: [DONE]\n\n')
        return resp

    return write


async def test_a_stream_says_its_route_in_headers(stack: Any) -> None:
    """A stream's body is decode's, unchanged: the route (path, reason, the prefill that
    served it and its hop time, retries, the decode) comes in headers, read back by
    route_of as disagg.proxy says it of a whole answer."""
    client, _, _ = await stack([_dies, _prefill_ok], _decode_streams, policy="round-robin")
    routes = []
    for _ in range(2):  # the first pick, either prefill: the dying one costs a failover
        async with client.post("/v1/completions", json={"prompt": "x", "stream": True}) as resp:
            assert resp.status == 200
            await resp.read()
            routes.append(route_of(resp.headers))
    for route in routes:
        assert route["path"] == "pd" and route["route_reason"] == "always"
        assert route["prefill_url"].startswith("http://127.0.0.1:")
        assert route["decode_url"].startswith("http://127.0.0.1:")
        assert route["prefill_url"] != route["decode_url"]
        assert isinstance(route["prefill_hop_ms"], float) and route["prefill_hop_ms"] > 0
        assert route["prefill_retries"] == 0  # a prefill hop moving on is not a decode retry
    assert routes[0]["prefill_url"] == routes[1]["prefill_url"]  # the live one, both times


async def test_a_decode_alone_stream_names_no_prefill(stack: Any) -> None:
    client, seen_p, _ = await stack(
        _prefill_ok, _decode_streams, routing=Policy(mode="threshold", threshold_tokens=100)
    )
    body = {"prompt": [1, 2, 3], "stream": True}  # 3 tokens, counted without a tokenize call
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 200
        await resp.read()
        route = route_of(resp.headers)
    assert route["path"] == "decode" and route["route_reason"] == "below_threshold"
    assert (route["prompt_tokens"], route["cached_tokens"]) == (3, 0)  # what it routed on
    assert "prefill_url" not in route and "prefill_hop_ms" not in route
    assert not seen_p


async def test_a_client_leaving_mid_stream_closes_the_decode_hop(
    stack: Any, caplog: pytest.LogCaptureFixture
) -> None:
    upstream_closed = asyncio.Event()

    def decode_streams(body: dict[str, Any]) -> Any:
        async def write(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            try:  # 10 s of events unless the proxy drops the connection
                for _ in range(200):
                    await resp.write(b'data: {"choices": [{"text": "a"}]}\n\n')
                    await asyncio.sleep(0.05)
            except (ConnectionResetError, asyncio.CancelledError):
                upstream_closed.set()
                raise
            return resp

        return write

    client, _, _ = await stack(_prefill_ok, decode_streams)
    async with client.post("/v1/completions", json={"prompt": "x", "stream": True}) as resp:
        assert (await resp.content.readline()).startswith(b"data: ")
        resp.close()
    await asyncio.wait_for(upstream_closed.wait(), 3)
    async with client.get("/health") as resp:
        assert (await resp.json())["decode"][0]["inflight"] == 0
    assert not [r for r in caplog.records if r.levelname == "ERROR"], caplog.text


async def test_decode_dying_mid_stream_ends_it_with_an_error_event(stack: Any) -> None:
    def decode_dies(body: dict[str, Any]) -> Any:
        async def write(request: web.Request) -> web.StreamResponse:
            resp = web.StreamResponse(headers={"Content-Type": "text/event-stream"})
            await resp.prepare(request)
            await resp.write(b'data: {"choices": [{"text": "a"}]}\n\n')
            await asyncio.sleep(0.2)  # the first chunk reaches the client on its own
            assert request.transport is not None
            request.transport.close()  # the worker is gone mid-answer
            return resp

        return write

    client, _, _ = await stack(_prefill_ok, decode_dies)
    async with client.post("/v1/completions", json={"prompt": "x", "stream": True}) as resp:
        assert resp.status == 200
        lines = [line.decode().strip() async for line in resp.content if line.strip()]
    assert lines[0] == 'data: {"choices": [{"text": "a"}]}' and lines[-1] == "data: [DONE]"
    error = json.loads(lines[1][len("data: ") :])["error"]
    assert error["code"] == 502 and "decode http://127.0.0.1:" in error["message"]
    assert "stream broken" in error["message"]


async def test_stream_error_before_the_first_chunk_is_json(stack: Any) -> None:
    def refuse(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 400, {"error": {"message": "stop: too many", "param": "stop", "code": 400}}

    def fails(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 500, {"error": {"message": "engine dead", "code": 500}}

    client, _, _ = await stack(_prefill_ok, refuse)
    async with client.post("/v1/completions", json={"prompt": "x", "stream": True}) as resp:
        assert resp.status == 400 and resp.content_type == "application/json"
        error = (await resp.json())["error"]
    assert error["message"] == "stop: too many" and error["param"] == "stop"
    client, _, _ = await stack(_prefill_ok, fails)
    async with client.post("/v1/completions", json={"prompt": "x", "stream": True}) as resp:
        assert resp.status == 502 and resp.content_type == "application/json"
        message = (await resp.json())["error"]["message"]
    assert "decode http://127.0.0.1:" in message and message.endswith("answered 500: engine dead")


async def test_chat_goes_through_both_hops(stack: Any) -> None:
    client, seen_p, seen_d = await stack(_prefill_ok, _decode_ok)
    body = {"messages": [{"role": "user", "content": "hi"}], "max_completion_tokens": 5}
    async with client.post("/v1/chat/completions", json=body) as resp:
        assert resp.status == 200
        assert (await resp.json())["choices"][0]["text"] == "abc"
    pre = seen_p[0]["body"]
    assert pre["max_tokens"] == 1 and pre["max_completion_tokens"] == 1
    assert pre["kv_transfer_params"]["do_remote_decode"] is True
    assert seen_d[0]["body"] == {**body, "kv_transfer_params": VLLM_PARAMS}


async def test_request_id_is_the_clients_when_safe_and_returned(stack: Any) -> None:
    client, seen_p, seen_d = await stack(_prefill_ok, _decode_ok)
    for given, kept in (("job-7.a:1", True), ("bad id!", False), ("x" * 129, False)):
        headers = {"X-Request-Id": given}
        async with client.post("/v1/completions", json={"prompt": "x"}, headers=headers) as r:
            assert r.status == 200
            answered = r.headers["X-Request-Id"]
        assert seen_p[-1]["request_id"] == seen_d[-1]["request_id"] == answered
        assert (answered == given) is kept
    async with client.post("/v1/completions", json={"prompt": "x", "n": 2}) as r:
        assert r.status == 400 and r.headers["X-Request-Id"].startswith("cmpl-")


async def test_split_incompatible_fields_are_refused_before_any_hop(stack: Any) -> None:
    client, seen_p, _ = await stack(_prefill_ok, _decode_ok)
    for extra, field in (
        ({"n": 2}, "n"),
        ({"best_of": 2}, "best_of"),
        ({"use_beam_search": True}, "use_beam_search"),
        ({"kv_transfer_params": {"do_remote_decode": True}}, "kv_transfer_params"),
    ):
        async with client.post("/v1/completions", json={"prompt": "x", **extra}) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["message"].startswith(f"{field}: ")
    assert not seen_p


async def test_unknown_route_and_wrong_method_are_json(stack: Any) -> None:
    client, _, _ = await stack(_prefill_ok, _decode_ok)
    async with client.post("/v1/embeddings", json={}) as resp:
        assert resp.status == 404
        error = (await resp.json())["error"]
    assert error["code"] == 404 and error["type"] == "invalid_request_error"
    assert error["message"].startswith("/v1/embeddings: no such route")
    assert "POST /v1/completions" in error["message"] and "GET /health" in error["message"]
    async with client.get("/v1/completions") as resp:
        assert resp.status == 405
        message = (await resp.json())["error"]["message"]
    assert message.startswith("GET /v1/completions: method not allowed; use POST")


async def test_a_full_decode_cache_stays_503(stack: Any) -> None:
    def full(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 503, {"error": {"message": "KV cache full: need 7 blocks"}}

    client, _, _ = await stack(_prefill_ok, full)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 503


def _full(retry_after: str) -> Any:
    def answer(body: dict[str, Any]) -> Any:
        async def write(request: web.Request) -> web.Response:
            error = {"error": {"message": "KV cache busy: 64 requests already wait"}}
            return web.json_response(error, status=503, headers={"Retry-After": retry_after})

        return write

    return answer


async def test_a_full_prefill_sends_the_request_to_the_next_one(stack: Any) -> None:
    client, seen_p, seen_d = await stack([_full("3"), _prefill_ok], _decode_ok)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 200, await resp.text()
    assert len(seen_p) == 2 and len(seen_d) == 1  # tried the full one, then the other


def _dies(body: dict[str, Any]) -> Any:
    """A worker that drops the connection mid-request, as one killed then does."""

    async def respond(request: web.Request) -> web.StreamResponse:
        assert request.transport is not None
        request.transport.close()
        await asyncio.sleep(1)
        return web.Response()

    return respond


async def test_a_prefill_that_dies_mid_request_is_retried_on_the_next_one(stack: Any) -> None:
    client, seen_p, seen_d = await stack([_dies, _prefill_ok], _decode_ok, policy="round-robin")
    for _ in range(2):  # whichever the policy picks first: no client sees the dead one
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            assert resp.status == 200, await resp.text()
    assert len(seen_p) == 3 and len(seen_d) == 2


async def test_health_counts_each_hop_that_moved_on_by_role_and_cause(stack: Any) -> None:
    """A hop that went on to the next worker is counted where the worker it left is: by
    role, as ``unreachable`` (refused, reset: a dead worker) or ``full`` (503)."""
    client, seen_p, _ = await stack([_dies, _full("1"), _prefill_ok], _decode_ok,
                                    policy="round-robin")  # fmt: skip
    for _ in range(3):  # each worker is the first pick once
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            assert resp.status == 200, await resp.text()
    async with client.get("/health") as resp:
        health = await resp.json()
    # the others follow the first pick in pool order: dying, full, good; full, dying, good;
    # good alone
    assert health["hop_failovers"] == {
        "prefill": {"unreachable": 2, "full": 2},
        "decode": {"unreachable": 0, "full": 0},
    }
    assert len(seen_p) == 7


async def test_a_decode_that_dies_mid_request_is_not_retried(stack: Any) -> None:
    # decode may have produced output: what it did is not repeated elsewhere
    client, _, seen_d = await stack(_prefill_ok, [_dies, _decode_ok], policy="round-robin")
    statuses = []
    for _ in range(2):
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            statuses.append(resp.status)
    assert sorted(statuses) == [200, 502] and len(seen_d) == 2


async def test_a_down_decode_sends_the_request_to_the_next_one(stack: Any) -> None:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        dead = f"http://127.0.0.1:{s.getsockname()[1]}"
    client, seen_p, seen_d = await stack(_prefill_ok, [dead, _decode_ok], policy="round-robin")
    for _ in range(2):  # whichever the policy picks first
        async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
            assert resp.status == 200, await resp.text()
    assert len(seen_d) == 2 and all(s["path"] != RELEASE_PATH for s in seen_p)


async def test_no_worker_with_room_is_a_503_with_retry_after_never_a_502(stack: Any) -> None:
    client, _, seen_d = await stack([_full("7"), _full("7")], _decode_ok)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 503
        assert resp.headers["Retry-After"] == "7"
        assert "KV cache busy" in (await resp.json())["error"]["message"]
    assert not seen_d


async def test_a_failed_decode_hop_tells_the_prefill_to_release(stack: Any) -> None:
    """The prefill gets its own kv_transfer_params back at /v1/kv/release, for whole and
    streamed requests alike, so the blocks are freed now instead of at the lease's end."""

    def decode_fails(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        return 500, {"error": {"message": "engine died"}}

    client, seen_p, _ = await stack(_prefill_ok, decode_fails)
    for stream in (False, True):
        async with client.post("/v1/completions", json={"prompt": "x", "stream": stream}) as r:
            assert r.status == 502
    for _ in range(50):  # the release is sent in the background
        releases = [s for s in seen_p if s["path"] == RELEASE_PATH]
        if len(releases) == 2:
            break
        await asyncio.sleep(0.02)
    assert [r["body"] for r in releases] == [{"kv_transfer_params": VLLM_PARAMS}] * 2
    assert releases[0]["request_id"] == seen_p[0]["request_id"]


async def test_a_client_leaving_during_the_decode_hop_releases_prefills_blocks(
    stack: Any,
) -> None:
    decode_done = asyncio.Event()

    async def slow_decode(body: dict[str, Any]) -> tuple[int, dict[str, Any]]:
        try:
            await asyncio.sleep(10)
        finally:
            decode_done.set()  # the proxy dropped its connection: decode's handler ends
        return _decode_ok(body)

    client, seen_p, _ = await stack(_prefill_ok, slow_decode)
    with pytest.raises(asyncio.TimeoutError):
        async with client.post(
            "/v1/completions", json={"prompt": "x"}, timeout=aiohttp.ClientTimeout(total=0.5)
        ) as resp:
            await resp.read()
    for _ in range(100):  # well within a second
        if any(s["path"] == RELEASE_PATH for s in seen_p):
            break
        await asyncio.sleep(0.01)
    assert [s["body"] for s in seen_p if s["path"] == RELEASE_PATH] == [
        {"kv_transfer_params": VLLM_PARAMS}
    ]
    await asyncio.wait_for(decode_done.wait(), 2.0)


async def test_prefill_without_transfer_params_is_explained(stack: Any) -> None:
    client, _, _ = await stack(_decode_ok, _decode_ok)
    async with client.post("/v1/completions", json={"prompt": "x"}) as resp:
        assert resp.status == 502
        assert "returned no kv_transfer_params" in (await resp.json())["error"]["message"]


def test_round_robin_cycles_and_least_loaded_avoids_busy_workers() -> None:
    rr = Pool(["a", "b", "c"], "round-robin")
    assert [rr.pick().url for _ in range(4)] == ["a", "b", "c", "a"]
    ll = Pool(["a", "b", "c"], "least-loaded")
    ll.backends[0].inflight = 2
    ll.backends[1].inflight = 1
    assert ll.pick().url == "c"
    ll.backends[2].inflight = 3
    assert ll.pick().url == "b"


def test_unknown_policy_names_the_flag() -> None:
    with pytest.raises(ValueError, match="--policy: 'random' is not one of"):
        Pool(["a"], "random")
