"""The router's OpenAI front door over HTTP, against counting stub engines: a bad field is
refused before the prefill hop (no prefill asked), and ``GET /v1/models`` is a decode
engine's answer, from the next decode when one fails, a 503 naming the pool when none."""

from __future__ import annotations

import socket
from collections.abc import AsyncIterator, Callable
from typing import Any

import aiohttp
import pytest
from aiohttp import web

from disagg_worker.serve.proxy.app import build_app
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.upstream import Pool

# vLLM 0.32's GET /v1/models body (entrypoints/openai/models/protocol.py ModelList)
MODELS = {
    "object": "list",
    "data": [{"id": "tiny", "object": "model", "created": 1, "owned_by": "vllm",
              "root": "/models/tiny", "parent": None, "max_model_len": 1024}],
}  # fmt: skip
HANDOFF = {"do_remote_prefill": True, "remote_engine_id": "e1", "remote_block_ids": [1]}


class Engine:
    """A stub engine: what it was asked (path, body, Authorization), and what it answers
    to ``GET /v1/models`` (``models``: status and body)."""

    def __init__(self, models: tuple[int, Any] = (200, MODELS)) -> None:
        self.asked: list[tuple[str, Any, str | None]] = []
        self.models = models

    def app(self) -> web.Application:
        async def complete(request: web.Request) -> web.Response:
            self.asked.append((request.path, await request.json(), None))
            answer = {"choices": [{"text": "a"}], "kv_transfer_params": HANDOFF}
            return web.json_response(answer)

        async def models(request: web.Request) -> web.Response:
            self.asked.append((request.path, None, request.headers.get("Authorization")))
            status, body = self.models
            return web.json_response(body, status=status)

        app = web.Application()
        app.router.add_post("/v1/completions", complete)
        app.router.add_post("/v1/chat/completions", complete)
        app.router.add_get("/v1/models", models)
        return app


def _dead() -> str:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return f"http://127.0.0.1:{s.getsockname()[1]}"


@pytest.fixture
async def front() -> AsyncIterator[Callable[..., Any]]:
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def listen(app: web.Application) -> str:
        runner = web.AppRunner(app)
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        return f"http://127.0.0.1:{runner.addresses[0][1]}"

    async def make(prefill: list[Engine | str], decode: list[Engine | str] | Pool) -> Any:
        """A real proxy over these engines (a string: a URL nobody listens on); its
        client session."""
        urls: list[list[str]] = []
        for engines in (prefill, [] if isinstance(decode, Pool) else decode):
            urls.append([e if isinstance(e, str) else await listen(e.app()) for e in engines])
        pool = decode if isinstance(decode, Pool) else Pool(urls[1], "round-robin")
        proxy = await listen(build_app(Proxy(Pool(urls[0], "round-robin"), pool)))
        sessions.append(aiohttp.ClientSession(base_url=proxy))
        return sessions[-1]

    yield make
    for session in sessions:
        await session.close()
    for runner in runners:
        await runner.cleanup()


BAD = [
    ("/v1/completions", {"prompt": "x", "max_tokens": 0}, "max_tokens"),
    ("/v1/chat/completions", {"messages": [{"role": "user", "content": "x"}],
                              "max_completion_tokens": -1}, "max_completion_tokens"),
    ("/v1/chat/completions", {"prompt": "x"}, "messages"),
    ("/v1/completions", {"max_tokens": 4}, "prompt"),
    ("/v1/completions", {"prompt": "x", "temperature": 3}, "temperature"),
    ("/v1/completions", {"prompt": "x", "top_p": 0}, "top_p"),
    ("/v1/completions", {"prompt": "x", "stream": "false"}, "stream"),
    ("/v1/completions", {"prompt": "x", "stream_options": {"include_usage": True}},
     "stream_options"),
    ("/v1/completions", {"prompt": "x", "n": 3}, "n"),
]  # fmt: skip


async def test_a_bad_field_never_reaches_a_prefill(front: Any) -> None:
    prefill, decode = Engine(), Engine()
    client = await front([prefill], [decode])
    for path, body, param in BAD:
        async with client.post(path, json=body) as resp:
            assert resp.status == 400, (body, await resp.text())
            assert resp.headers["X-Request-Id"]
            error = (await resp.json())["error"]
        assert error["param"] == param and error["code"] == 400, error
        assert error["type"] == "BadRequestError" and error["message"].startswith(f"{param}: ")
    assert prefill.asked == [] and decode.asked == []
    async with client.post("/v1/completions", json={"prompt": "x", "max_tokens": 2}) as resp:
        assert resp.status == 200
    assert (
        [p for p, _, _ in prefill.asked] == [p for p, _, _ in decode.asked] == ["/v1/completions"]
    )


async def test_models_is_the_decode_engines_answer(front: Any) -> None:
    prefill, decode = Engine(), Engine()
    client = await front([prefill], [decode])
    async with client.get("/v1/models", headers={"Authorization": "Bearer k"}) as resp:
        assert resp.status == 200
        assert await resp.json() == MODELS
    assert decode.asked == [("/v1/models", None, "Bearer k")] and prefill.asked == []


async def test_models_goes_on_to_the_next_decode_when_one_fails(front: Any) -> None:
    failing = Engine(models=(500, {"error": {"message": "engine dead"}}))
    good = Engine()
    client = await front([Engine()], [_dead(), failing, good])
    for _ in range(3):  # round-robin: each decode is the pick once
        async with client.get("/v1/models") as resp:
            assert resp.status == 200
            assert await resp.json() == MODELS
    assert len(good.asked) == 3 and len(failing.asked) >= 1


async def test_an_engines_client_error_is_its_answer(front: Any) -> None:
    """vLLM with --api-key answers 401 to a listing without the key: relayed, and no other
    decode is asked (it would answer the same)."""
    refusing = Engine(models=(401, {"error": "Unauthorized"}))
    other = Engine()
    client = await front([Engine()], [refusing, other])
    async with client.get("/v1/models") as resp:  # round-robin's first pick: the first
        assert resp.status == 401
        assert await resp.json() == {"error": "Unauthorized"}
    assert len(refusing.asked) == 1 and not other.asked


async def test_no_decode_is_a_503_naming_the_pool(front: Any) -> None:
    service = "demo-d.ns.svc.cluster.local:8000"
    client = await front([Engine()], Pool([], "round-robin", service=service))
    async with client.get("/v1/models") as resp:
        assert resp.status == 503 and resp.headers["Retry-After"] == "1"
        error = (await resp.json())["error"]
    assert service in error["message"] and error["code"] == 503
    dead = [_dead(), _dead()]
    client = await front([Engine()], dead)
    async with client.get("/v1/models") as resp:
        assert resp.status == 503
        message = (await resp.json())["error"]["message"]
    assert all(url in message for url in dead) and "cannot connect" in message


async def test_the_route_list_names_models(front: Any) -> None:
    client = await front([Engine()], [Engine()])
    async with client.get("/v1/embeddings") as resp:
        assert resp.status == 404
        message = (await resp.json())["error"]["message"]
    assert "GET /v1/models" in message
