"""``toy-serve``: the toy engine's server, a prefill or a decode speaking the tickets
protocol (:mod:`.pd`) over an OpenAI-style ``/v1/completions``.

Its "KV" is the prompt's SHA-256 repeated to 4 KiB; its tokens are that digest's
characters, so a decode that fetched the KV and one that computed it answer the same text.
A prefill holds each ticket's KV until a decode fetches it or the proxy drops it
(``POST /toy/drop``); ``POST /toy/forget`` makes it lose every ticket it hands out from
then on (a prefill whose KV is gone before decode reads it). ``GET /toy/stats`` counts.
A decode answers 500 to the prompt ``boom``: a decode hop that fails after the prefill."""

from __future__ import annotations

import argparse
import hashlib
import sys
import time
import uuid
from typing import Any

import aiohttp
from aiohttp import web

from tests.support.toy_engine.pd import COMPUTED, FETCHED

KV_BYTES = 4096


def kv_of(prompt: str) -> str:
    digest = hashlib.sha256(prompt.encode()).hexdigest()
    return (digest * (KV_BYTES // len(digest) + 1))[:KV_BYTES]


def app(role: str) -> web.Application:
    held: dict[str, str] = {}
    stats = {"prefills": 0, "drops": 0, "held": 0, FETCHED: 0, COMPUTED: 0}
    state = {"forget": False}

    def answer(kv: str, max_tokens: int, **extra: Any) -> web.Response:
        text = kv[:max_tokens]
        body = {"object": "text_completion", "choices": [{"index": 0, "text": text}],
                "usage": {"completion_tokens": len(text)}, **extra}  # fmt: skip
        return web.json_response(body)

    async def completions(request: web.Request) -> web.Response:
        body = await request.json()
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
            return answer(kv_of(prompt), max_tokens, toy_kv="computed")
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
    application.router.add_get("/health", health)
    application.router.add_get("/metrics", metrics)
    return application


def main(argv: list[str]) -> None:
    p = argparse.ArgumentParser(prog="toy-serve")
    p.add_argument("--role", choices=("prefill", "decode"), required=True)
    p.add_argument("--listen", type=int, required=True)
    p.add_argument("--host", default="127.0.0.1")
    args = p.parse_args(argv)
    web.run_app(app(args.role), host=args.host, port=args.listen, print=None)


if __name__ == "__main__":
    main(sys.argv[1:])
