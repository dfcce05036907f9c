"""A P/D protocol that sends both hops at once (SGLang's bootstrap rooms, spoken by the toy
engine of tests/support/toy_engine/: :mod:`~tests.support.toy_engine.rooms`) runs through
the real proxy over HTTP with nothing changed outside the toy's folder and the protocol
seam: the hops overlap at the toy servers, the decode's answer is the client's, and a
failure of either hop cancels the other and names its hop."""

from __future__ import annotations

import itertools
import socket
import time
from collections.abc import AsyncIterator, Callable
from pathlib import Path
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve.proxy.app import build_app
from disagg_worker.serve.proxy.config import ProxyConfig
from disagg_worker.serve.proxy.flow import Proxy
from disagg_worker.serve.proxy.hops import route_of
from tests.support.toy_engine import server as toy
from tests.support.toy_engine.rooms import FIELDS, Rooms

ROOT = Path(__file__).resolve().parents[4]
Stack = Callable[..., Any]


def _closed_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


@pytest.fixture
async def stack() -> AsyncIterator[Stack]:
    """``make(prefills=1)``: toy prefills (and URLs nobody listens on, for ``dead``) and a
    toy decode behind a real proxy speaking rooms; (client, prefill URLs, decode URL)."""
    servers: list[TestServer] = []
    runners: list[web.AppRunner] = []
    sessions: list[aiohttp.ClientSession] = []

    async def serve(app: web.Application) -> str:
        server = TestServer(app, host="127.0.0.1")
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    async def make(dead: int = 0, rooms: Rooms | None = None) -> tuple[Any, list[str], str]:
        prefills = [f"http://127.0.0.1:{_closed_port()}" for _ in range(dead)]
        prefills.append(await serve(toy.app("prefill")))
        decode = await serve(toy.app("decode"))
        config = ProxyConfig(protocol=rooms or Rooms(itertools.count(7).__next__))
        runner = web.AppRunner(build_app(Proxy(prefills, [decode], config)),
                               handler_cancellation=True)  # fmt: skip
        await runner.setup()
        runners.append(runner)
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}")
        sessions.append(session)
        return session, prefills, decode

    yield make
    for session in sessions:
        await session.close()
    for runner in runners:
        await runner.cleanup()
    for server in servers:
        await server.close()


async def _hops(session: aiohttp.ClientSession, url: str, room: int) -> list[dict[str, Any]]:
    async with session.get(url + "/toy/hops") as resp:
        return [h for h in (await resp.json())["hops"] if h["room"] == room]


async def test_both_hops_run_at_once_and_the_decode_answers(stack: Stack) -> None:
    client, (prefill,), decode = await stack()
    body = {"model": "toy", "prompt": "hello", "max_tokens": 6}
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 200, await resp.text()
        out = await resp.json()
    assert out["choices"][0]["text"] == toy.kv_of("hello")[:6]
    assert out["toy_kv"] == "fetched" and out["toy_kv_bytes"] == toy.KV_BYTES
    assert out["toy_room"] == 7  # the protocol's draw, not the proxy's
    assert out["disagg"]["proxy"]["path"] == "pd"
    assert out["disagg"]["proxy"]["prefill_url"] == prefill
    (pre,) = await _hops(client, prefill, 7)
    (dec,) = await _hops(client, decode, 7)
    # the decode hop began before the prefill hop answered, and the other way round
    assert dec["start"] < pre["end"] and pre["start"] < dec["end"], (pre, dec)


async def test_a_failed_prefill_fails_the_request_naming_it_and_cancels_the_decode(
    stack: Stack,
) -> None:
    client, (prefill,), _ = await stack()
    t0 = time.monotonic()
    body = {"model": "toy", "prompt": "prefill-boom", "max_tokens": 3}
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 502
        message = (await resp.json())["error"]["message"]
    assert message.startswith(f"prefill {prefill}/v1/completions answered 500"), message
    assert "prefill-boom" in message
    # the decode, waiting for a room no prefill fills, was not waited for
    assert time.monotonic() - t0 < toy.ROOM_WAIT_S


async def test_a_failed_decode_cancels_the_prefill_and_names_the_decode(stack: Stack) -> None:
    client, _, decode = await stack()
    t0 = time.monotonic()
    body = {"model": "toy", "prompt": "boom", "max_tokens": 3}
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 502
        message = (await resp.json())["error"]["message"]
    assert message.startswith(f"decode {decode}/v1/completions answered 500"), message
    # the prefill, waiting for a decode to claim its room, was not waited for
    assert time.monotonic() - t0 < toy.ROOM_WAIT_S


async def test_an_unreachable_prefill_is_left_for_the_next_with_a_new_room(
    stack: Stack,
) -> None:
    client, prefills, _ = await stack(dead=1)
    body = {"model": "toy", "prompt": "again", "max_tokens": 4}
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 200, await resp.text()
        out = await resp.json()
    assert out["toy_room"] == 8  # room 7 named the dead prefill
    assert out["disagg"]["proxy"]["prefill_url"] == prefills[1]
    assert out["choices"][0]["text"] == toy.kv_of("again")[:4]


async def test_a_stream_relays_the_decodes_events(stack: Stack) -> None:
    client, (prefill,), _ = await stack()
    body = {"model": "toy", "prompt": "streamed", "max_tokens": 5, "stream": True}
    async with client.post("/v1/completions", json=body) as resp:
        assert resp.status == 200
        assert resp.headers["Content-Type"].startswith("text/event-stream")
        route, text = route_of(resp.headers), (await resp.read()).decode()
    assert route["path"] == "pd" and route["prefill_url"] == prefill
    events = [line[len("data: ") :] for line in text.splitlines() if line.startswith("data: ")]
    assert events[-1] == "[DONE]"
    assert toy.kv_of("streamed")[:5] in events[0] and '"toy_kv": "fetched"' in events[0]


async def test_a_client_may_not_send_the_rooms_fields(stack: Stack) -> None:
    client, _, _ = await stack()
    for key in FIELDS:
        body = {"model": "toy", "prompt": "x", key: 1}
        async with client.post("/v1/completions", json=body) as resp:
            assert resp.status == 400
            assert (await resp.json())["error"]["message"].startswith(f"{key}: ")


def test_the_product_never_spells_the_rooms_fields() -> None:
    """The seam holds: the proxy, router and canary run the toy's rooms with no line that
    names them (the fields live in the toy's folder alone)."""
    product = [ROOT / "worker", ROOT / "operator", ROOT / "contract"]
    spelled = [
        str(path.relative_to(ROOT))
        for folder in product
        for path in folder.rglob("*.py")
        if any(key in path.read_text() for key in FIELDS)
    ]
    assert spelled == []
