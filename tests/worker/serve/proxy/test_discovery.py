"""The proxy's pools from Service names: every address the name resolves to, resolved
again as pods come and go, a 503 naming the Service while none is ready."""

from __future__ import annotations

import asyncio
from collections import Counter
from typing import Any

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve.proxy import app as proxy_cli
from disagg_worker.serve.proxy.discovery import Periodic, Refresher, parse_service, resolve
from disagg_worker.serve.proxy.upstream import Backend, HopError, Pool


async def test_a_name_resolves_to_every_address_as_urls_with_the_real_resolver() -> None:
    assert await resolve("127.0.0.1", 8000) == ["http://127.0.0.1:8000"]
    assert await resolve("::1", 8000) == ["http://[::1]:8000"]
    with pytest.raises(OSError):
        await resolve("no-such-service.invalid", 8000)


def test_service_names_are_host_and_port() -> None:
    assert parse_service("demo-prefill.ns.svc:8000") == ("demo-prefill.ns.svc", 8000)
    for bad in ("demo-prefill", "demo:http", ":8000", "demo:0"):
        with pytest.raises(ValueError, match="HOST:PORT"):
            parse_service(bad)


class ClusterDns:
    """A stand-in for cluster DNS (no cluster here): what a headless Service answers as
    pods become ready and go; empty is NXDOMAIN."""

    def __init__(self) -> None:
        self.answers: list[str] = []

    async def __call__(self, host: str, port: int) -> list[str]:
        if not self.answers:
            raise OSError(f"{host}: Name or service not known")
        return [f"http://{a}:{port}" for a in self.answers]


async def test_the_pool_follows_the_service_and_spreads_over_every_pod_cluster_dns_stand_in() -> (
    None
):
    dns = ClusterDns()
    pool = Pool([], "round-robin", service="demo-decode.ns.svc:8000")
    refresher = Refresher(pool, "demo-decode.ns.svc", 8000, 60.0, resolver=dns)
    await refresher.refresh()
    with pytest.raises(HopError) as e:  # no ready pod yet
        pool.candidates()
    assert e.value.status == 503 and "demo-decode.ns.svc:8000" in str(e.value)
    assert e.value.retry_after == "1"
    dns.answers = ["10.0.0.1", "10.0.0.2", "10.0.0.3"]
    await refresher.refresh()
    picks = Counter(pool.pick().url for _ in range(30))
    assert picks == {f"http://10.0.0.{i}:8000": 10 for i in (1, 2, 3)}  # not one cached answer
    busy: Backend = pool.backends[1]
    busy.inflight = 4
    dns.answers = ["10.0.0.2", "10.0.0.4"]  # a pod gone, one new
    await refresher.refresh()
    assert [b.url for b in pool.backends] == ["http://10.0.0.2:8000", "http://10.0.0.4:8000"]
    assert pool.backends[0] is busy and busy.inflight == 4  # kept across the refresh
    dns.answers = []
    await refresher.refresh()
    assert pool.backends == []


async def test_the_refresher_runs_until_closed() -> None:
    dns = ClusterDns()
    dns.answers = ["10.0.0.1"]
    pool = Pool([], "round-robin", service="s:1")
    refresher = Refresher(pool, "s", 1, 0.01, resolver=dns)
    await refresher.start()
    assert len(pool.backends) == 1
    dns.answers = ["10.0.0.1", "10.0.0.2"]
    for _ in range(100):
        if len(pool.backends) == 2:
            break
        await asyncio.sleep(0.01)
    assert len(pool.backends) == 2
    await refresher.close()


class _LosesCancels(Periodic):
    """A refresh whose lookup ends as a failed one when cancelled, as an aiohttp call does
    on Python 3.10 when its own timeout fires with the cancel (a TimeoutError the refresh
    logs)."""

    refresh_s = 0.01
    lose = True

    async def refresh(self) -> None:
        try:
            await asyncio.sleep(0.05)
        except asyncio.CancelledError:
            if not self.lose:
                raise


async def test_closing_ends_the_refresh_loop_even_when_its_cancel_is_lost() -> None:
    periodic = _LosesCancels()
    await periodic.start()
    await asyncio.sleep(0.03)  # inside a refresh
    closing = asyncio.ensure_future(periodic.close())
    done, _ = await asyncio.wait({closing}, timeout=5)
    if not done:  # the loop ran on: stop it for good before failing
        periodic.lose = False
        assert periodic._task is not None
        periodic._task.cancel()
        await asyncio.wait({closing}, timeout=5)
    assert done, "close() waited on a refresh loop that never stopped"


async def test_the_proxy_command_serves_p_d_over_service_names_with_the_real_resolver() -> None:
    """``disagg proxy --prefill-service HOST:PORT --decode-service HOST:PORT`` as the
    rendered router runs it, with names this host resolves (loopback literals)."""
    seen: list[str] = []

    def stub(role: str) -> web.Application:
        async def handler(request: web.Request) -> web.Response:
            seen.append(role)
            if role == "prefill":
                return web.json_response(
                    {"choices": [{"text": ""}], "kv_transfer_params": {"a": 1}}
                )
            return web.json_response({"choices": [{"text": "ok"}]})

        app = web.Application()
        app.router.add_post("/v1/completions", handler)
        return app

    servers = [TestServer(stub(r), host="127.0.0.1") for r in ("prefill", "decode")]
    for s in servers:
        await s.start_server()
    args = proxy_cli._parser().parse_args(
        [
            *("--prefill-service", f"127.0.0.1:{servers[0].port}"),
            *("--decode-service", f"127.0.0.1:{servers[1].port}"),
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
            async with client.post(url + "/v1/completions", json={"prompt": "x"}) as resp:
                out: dict[str, Any] = await resp.json()
                assert resp.status == 200, out
            async with client.get(url + "/health") as resp:
                health = await resp.json()
        assert out["choices"][0]["text"] == "ok" and seen == ["prefill", "decode"]
        assert health["services"]["decode"] == f"127.0.0.1:{servers[1].port}"
    finally:
        await runner.cleanup()
        for s in servers:
            await s.close()


def test_urls_and_a_service_for_one_role_are_refused() -> None:
    with pytest.raises(SystemExit):
        proxy_cli._parser().parse_args(
            ["--prefill", "http://a", "--prefill-service", "a:1", "--decode", "http://b"]
        )
