"""``toy-serve``: the toy engine's server, a prefill or a decode speaking the tickets
protocol (:mod:`.pd`) over an OpenAI-style ``/v1/completions``.

Its "KV" is the prompt's SHA-256 repeated to 4 KiB; its tokens are that digest's
characters, so a decode that fetched the KV and one that computed it answer the same text.
A prefill holds each ticket's KV until a decode fetches it or the proxy drops it
(``POST /toy/drop``); ``POST /toy/forget`` makes it lose every ticket it hands out from
then on (a prefill whose KV is gone before decode reads it). ``GET /toy/stats`` counts.
A decode answers 500 to the prompt ``boom``: a decode hop that fails after the prefill.

It speaks the rooms protocol (:mod:`.rooms`, both hops at once) too: a prefill holds a
room's KV until a decode claims the room at ``GET /toy/bootstrap/{room}``, each side
waiting for the other at most :data:`ROOM_WAIT_S`, then failing; a prefill answers 500 to
the prompt ``prefill-boom``. ``GET /toy/hops`` lists when each rooms hop began and ended.
A decode honours ``stream``: its answer as one event, then ``[DONE]``."""

from __future__ import annotations

import argparse
import asyncio
import hashlib
import json
import sys
import time
import uuid
from dataclasses import dataclass, field
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.toy_engine.pd import COMPUTED, FETCHED

KV_BYTES = 4096
ROOM_WAIT_S = 5.0


@dataclass
class Room:
    """One bootstrap room: the prefill's KV once it has it, and whether a decode claimed it."""

    kv: asyncio.Future[str] = field(
        default_factory=lambda: asyncio.get_running_loop().create_future()
    )
    claimed: asyncio.Event = field(default_factory=asyncio.Event)


def kv_of(prompt: str) -> str:
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return (digest * (KV_BYTES // len(digest) + 1))[:KV_BYTES]


def app(role: str) -> web.Application:
    held: dict[str, str] = {}
    stats = {"prefills": 0, "drops": 0, "held": 0, FETCHED: 0, COMPUTED: 0}
    state = {"forget": False}
    rooms: dict[int, Room] = {}
    hops: list[dict[str, Any]] = []

    def answer(kv: str, max_tokens: int, stream: bool = False, **extra: Any) -> web.Response:
        text = kv[:max_tokens]
        body = {"object": "text_completion", "choices": [{"index": 0, "text": text}],
                "usage": {"completion_tokens": len(text)}, **extra}  # fmt: skip
        if stream and role == "decode":
            events = f"data: {json.dumps(body)}\n\ndata: [DONE]\n\n"
            return web.Response(text=events, content_type="text/event-stream")
        return web.json_response(body)

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
        if body.get("bootstrap_room") is not None:
            return await room_hop(body, int(body["bootstrap_room"]))
        prompt, max_tokens = str(body.get("prompt", "")), int(body.get("max_tokens", 4))
        phase = body.get("toy_phase", "local")
        if phase == "prefill":
            if role != "prefill":
                return web.json_response({"error": {"message": "not a prefill"}}, status=400)
            ticket = uuid.uuid4().hex
            stats["prefills"] += 1
            if not state["forget"]:
                held[ticket] = kv_of(prompt)
            stats["held"] = len(held)
            where = {"id": ticket, "from": f"http://{request.host}"}
            return answer(kv_of(prompt), 1, toy_ticket=where)
        if phase != "decode":
            return answer(kv_of(prompt), max_tokens, bool(body.get("stream")), toy_kv="computed")
        if role != "decode":
            return web.json_response({"error": {"message": "not a decode"}}, status=400)
        if prompt == "boom":
            return web.json_response({"error": {"message": "boom"}}, status=500)
        ticket = body["toy_ticket"]
        t0 = time.perf_counter()
        # Service names resolve as in the worker (cluster DNS, or the local hosts file)
        connector = aiohttp.TCPConnector(resolver=aiohttp.ThreadedResolver())
        async with aiohttp.ClientSession(connector=connector) as session:
            url = f"{ticket['from']}/toy/kv/{ticket['id']}"
            async with session.get(url) as resp:
                kv = (await resp.json())["kv"] if resp.status == 200 else None
        if kv is None:
            stats[COMPUTED] += 1
            return answer(kv_of(prompt), max_tokens, toy_kv="computed")
        stats[FETCHED] += 1
        took = time.perf_counter() - t0
        return answer(kv, max_tokens, toy_kv="fetched", toy_kv_bytes=len(kv),
                      toy_kv_seconds=took)  # fmt: skip

    async def room_hop(body: dict[str, Any], room: int) -> web.Response:
        start = time.time()
        try:
            if role == "prefill":
                return await room_prefill(body, room)
            return await room_decode(body, room)
        finally:
            hops.append({"role": role, "room": room, "start": start, "end": time.time()})

    async def room_prefill(body: dict[str, Any], room: int) -> web.Response:
        prompt = str(body.get("prompt", ""))
        if prompt == "prefill-boom":
            return _error(500, "prefill-boom")
        stats["prefills"] += 1
        held = rooms.setdefault(room, Room())
        if not held.kv.done():
            held.kv.set_result(kv_of(prompt))
        try:  # as SGLang's prefill, it sends its KV once the decode has bootstrapped
            await asyncio.wait_for(held.claimed.wait(), ROOM_WAIT_S)
        except asyncio.TimeoutError:
            rooms.pop(room, None)
            return _error(504, f"no decode claimed bootstrap room {room} in {ROOM_WAIT_S:g}s")
        return answer(kv_of(prompt), 1, toy_room=room)

    async def bootstrap(request: web.Request) -> web.Response:
        room = int(request.match_info["room"])
        claimed = rooms.setdefault(room, Room())
        claimed.claimed.set()
        try:
            kv = await asyncio.wait_for(asyncio.shield(claimed.kv), ROOM_WAIT_S)
        except asyncio.TimeoutError:
            return _error(404, f"no prefill of bootstrap room {room} in {ROOM_WAIT_S:g}s")
        finally:
            rooms.pop(room, None)
        return web.json_response({"kv": kv})

    async def room_decode(body: dict[str, Any], room: int) -> web.Response:
        prompt, max_tokens = str(body.get("prompt", "")), int(body.get("max_tokens", 4))
        if role != "decode" or prompt == "boom":
            return _error(500, "boom" if prompt == "boom" else "not a decode")
        host, port = str(body["bootstrap_host"]), body["bootstrap_port"]
        url = f"http://{f'[{host}]' if ':' in host else host}:{port}/toy/bootstrap/{room}"
        t0 = time.perf_counter()
        connector = aiohttp.TCPConnector(resolver=aiohttp.ThreadedResolver())
        try:
            async with aiohttp.ClientSession(connector=connector) as session:
                timeout = aiohttp.ClientTimeout(total=ROOM_WAIT_S + 1.0)
                async with session.get(url, timeout=timeout) as resp:
                    status, data = resp.status, await resp.json()
        except (aiohttp.ClientError, asyncio.TimeoutError, ValueError) as e:
            status, data = 0, {"error": {"message": repr(e)}}
        if status != 200:
            why = data.get("error", {}).get("message") if isinstance(data, dict) else data
            return _error(502, f"no KV for bootstrap room {room} from {host}:{port}: {why}")
        stats[FETCHED] += 1
        took = time.perf_counter() - t0
        return answer(data["kv"], max_tokens, bool(body.get("stream")), toy_kv="fetched",
                      toy_kv_bytes=len(data["kv"]), toy_kv_seconds=took, toy_room=room)  # fmt: skip

    async def hop_times(_: web.Request) -> web.Response:
        return web.json_response({"hops": hops})

    async def fetch(request: web.Request) -> web.Response:
        kv = held.pop(request.match_info["id"], None)
        stats["held"] = len(held)
        if kv is None:
            return web.json_response({"error": "no such ticket"}, status=404)
        return web.json_response({"kv": kv})

    async def drop(request: web.Request) -> web.Response:
        ticket = (await request.json()).get("id")
        if held.pop(ticket, None) is not None:
            stats["drops"] += 1
        stats["held"] = len(held)
        return web.json_response({"dropped": ticket})

    async def forget(_: web.Request) -> web.Response:
        state["forget"] = True
        return web.json_response({"forget": True})

    async def counts(_: web.Request) -> web.Response:
        return web.json_response(stats)

    async def health(_: web.Request) -> web.Response:
        return web.json_response({"ok": True})

    async def metrics(_: web.Request) -> web.Response:
        return web.Response(text=f"{FETCHED} {stats[FETCHED]}\n{COMPUTED} {stats[COMPUTED]}\n")

    application = web.Application()
    application.router.add_post("/v1/completions", completions)
    application.router.add_get("/toy/kv/{id}", fetch)
    application.router.add_post("/toy/drop", drop)
    application.router.add_post("/toy/forget", forget)
    application.router.add_get("/toy/stats", counts)
    application.router.add_get("/toy/bootstrap/{room}", bootstrap)
    application.router.add_get("/toy/hops", hop_times)
    application.router.add_get("/health", health)
    application.router.add_get("/metrics", metrics)
    return application


def _error(status: int, message: str) -> web.Response:
    return web.json_response({"error": {"message": message}}, status=status)


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="toy-serve")
    p.add_argument("--role", choices=("prefill", "decode"), required=True)
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    web.run_app(app(args.role), host=args.host, port=args.listen, print=None)


if __name__ == "__main__":
    main(sys.argv[1:])
