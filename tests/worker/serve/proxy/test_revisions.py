"""The proxy pairs each request within one KV revision: the choice among revisions
(serve.proxy.revisions), and the real ``disagg proxy`` command line over two revisions'
Services, each resolved by the real resolver (loopback names 127.0.0.<kv>)."""

from __future__ import annotations

import asyncio
import socket
from collections import Counter
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve.proxy import app as proxy_cli
from disagg_worker.serve.proxy.revisions import Pair, Pairs
from disagg_worker.serve.proxy.upstream import Pool


def _pair(kv: str, prefill: list[str], decode: list[str], policy: str = "least-loaded") -> Pair:
    return Pair(kv, Pool(prefill, policy, service="p"), Pool(decode, policy, service="d"))


def test_a_revision_with_both_roles_is_preferred_and_one_without_decode_never_chosen() -> None:
    lone = _pair("a", [], ["http://a-d"])
    whole = _pair("b", ["http://b-p"], ["http://b-d"])
    empty = _pair("c", ["http://c-p"], [])
    pairs = Pairs([lone, whole, empty], "least-loaded")
    assert {pairs.choose().kv for _ in range(6)} == {"b"}
    pairs = Pairs([empty, lone], "least-loaded")  # no whole pair: the one with a decode
    assert {pairs.choose().kv for _ in range(4)} == {"a"}


def test_requests_spread_over_every_revisions_decodes_by_the_policy() -> None:
    old = _pair("old", ["http://o-p"], ["http://o-d0", "http://o-d1", "http://o-d2"])
    new = _pair("new", ["http://n-p"], ["http://n-d0"])
    pairs = Pairs([old, new], "round-robin")
    assert Counter(pairs.choose().kv for _ in range(40)) == {"old": 30, "new": 10}
    busy = Pairs([old, new], "least-loaded")
    for b in old.decode.backends:
        b.inflight = 2  # the old revision's decodes are all busy: the new one's takes it
    assert {busy.choose().kv for _ in range(4)} == {"new"}
    assert busy.of(new.decode.backends[0]) is new


def _port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


async def test_the_proxy_command_pairs_each_request_within_one_revision() -> None:
    """``disagg proxy --prefill-service 127.0.0.{kv}:P --decode-service 127.0.0.{kv}:D
    --kv-revision 1 --kv-revision 2``: four workers, each revision's prefill hands out
    KV only its own decodes can read (a decode given another revision's answers 502, as
    a KV-incompatible handshake fails); every request must end well, both revisions
    must serve, and /health lists each revision's workers."""
    served: Counter[tuple[str, str]] = Counter()

    def worker(kv: str, role: str) -> web.Application:
        async def handler(request: web.Request) -> web.Response:
            body = await request.json()
            served[kv, role] += 1
            if role == "prefill":
                params = {"remote_engine_id": kv, "remote_block_ids": [1]}
                return web.json_response({"choices": [{"text": ""}], "kv_transfer_params": params})
            if body["kv_transfer_params"].get("remote_engine_id") != kv:
                return web.json_response({"error": {"message": "other KV revision"}}, status=502)
            await asyncio.sleep(0.01)
            return web.json_response({"choices": [{"text": kv}]})

        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        return app

    ports = {"prefill": _port(), "decode": _port()}
    servers = [
        TestServer(worker(kv, role), host=f"127.0.0.{kv}", port=ports[role])
        for kv in ("1", "2")
        for role in ports
    ]
    for s in servers:
        await s.start_server()
    args = proxy_cli._parser().parse_args(
        [
            *("--prefill-service", f"127.0.0.{{kv}}:{ports['prefill']}"),
            *("--decode-service", f"127.0.0.{{kv}}:{ports['decode']}"),
            *("--kv-revision", "1", "--kv-revision", "2"),
        ]
    )
    pairs, refreshers = proxy_cli.pools(args)
    app = proxy_cli.build_app(proxy_cli.Proxy(pairs, refreshers=refreshers))
    runner = web.AppRunner(app)
    await runner.setup()
    await web.TCPSite(runner, "127.0.0.1", 0).start()
    url = f"http://127.0.0.1:{runner.addresses[0][1]}"
    try:
        async with aiohttp.ClientSession() as client:

            async def one(i: int) -> tuple[int, Any]:
                body = {"prompt": f"p{i}", "max_tokens": 4}
                async with client.post(url + "/v1/completions", json=body) as resp:
                    return resp.status, await resp.json()

            answers = await asyncio.gather(*(one(i) for i in range(40)))
            async with client.get(url + "/health") as resp:
                health = await resp.json()
        assert [status for status, _ in answers] == [200] * 40, answers
        texts = Counter(out["choices"][0]["text"] for _, out in answers)
        assert set(texts) == {"1", "2"}, texts  # both revisions served
        assert served["1", "prefill"] == served["1", "decode"] == texts["1"]
        assert served["2", "prefill"] == served["2", "decode"] == texts["2"]
        assert set(health["kv_revisions"]) == {"1", "2"}
        assert health["kv_revisions"]["2"]["decode"][0]["url"].startswith("http://127.0.0.2:")
        assert len(health["decode"]) == 2
    finally:
        await runner.cleanup()
        for s in servers:
            await s.close()


@pytest.mark.parametrize(
    "argv",
    [
        ["--prefill-service", "a-{kv}:1", "--decode-service", "b:1", "--kv-revision", "x"],
        ["--prefill-service", "a-{kv}:1", "--decode-service", "b-{kv}:1"],
        ["--prefill-service", "a:1", "--decode-service", "b:1", "--kv-revision", "x"],
    ],
)
def test_revisions_and_service_names_go_together(argv: list[str]) -> None:
    with pytest.raises(SystemExit, match="--kv-revision goes with"):
        proxy_cli.pools(proxy_cli._parser().parse_args(argv))
