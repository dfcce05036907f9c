"""Transfer locality through the real proxy: stub prefills and decodes on their own loopback
addresses, their zones listed by a stub API server's EndpointSlices (read by the real
:class:`~disagg_worker.serve.proxy.zones.Zones`), and each request's pair checked by the
proxy's own figures and metrics."""

from __future__ import annotations

import itertools
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
from disagg_worker.serve.proxy.rules.routing import Policy
from disagg_worker.serve.proxy.zones import KubeApi, Zones
from tests.support.toy_engine import server as toy
from tests.support.toy_engine.rooms import Rooms

PARAMS = {"do_remote_prefill": True, "do_remote_decode": False, "remote_block_ids": [1],
          "remote_engine_id": "e", "remote_host": "h", "remote_port": 1}  # fmt: skip
Worker = tuple[str, str | None, int]  # (role, zone, status answered)


def _worker(role: str, status: int, seen: list[str]) -> web.Application:
    async def handler(request: web.Request) -> web.Response:
        seen.append(request.host)
        if status != 200:
            return web.json_response({"error": {"message": "full"}}, status=status)
        params = PARAMS if role == "prefill" else None
        return web.json_response({"choices": [{"text": "x"}], "kv_transfer_params": params})

    app = web.Application()
    app.router.add_post("/v1/completions", handler)
    return app


def _api(slices: list[dict[str, Any]]) -> web.Application:
    async def listing(request: web.Request) -> web.Response:
        assert request.match_info["ns"] == "ns"
        return web.json_response({"kind": "EndpointSliceList", "items": slices})

    app = web.Application()
    app.router.add_get("/apis/discovery.k8s.io/v1/namespaces/{ns}/endpointslices", listing)
    return app


def _slice(service: str, ip: str, zone: str | None) -> dict[str, Any]:
    endpoint: dict[str, Any] = {"addresses": [ip], "conditions": {"ready": True}}
    if zone is not None:
        endpoint["zone"] = zone
    labels = {"kubernetes.io/service-name": service}
    return {"metadata": {"name": f"{service}-{ip}", "labels": labels}, "endpoints": [endpoint]}


@pytest.fixture
async def stack() -> AsyncIterator[Callable[..., Any]]:
    servers: list[TestServer] = []
    cleanups: list[Any] = []

    async def serve(app: web.Application, host: str) -> str:
        server = TestServer(app, host=host)
        await server.start_server()
        servers.append(server)
        return str(server.make_url("")).rstrip("/")

    async def make(workers: list[Worker], mode: str, **kw: Any) -> tuple[Any, dict[str, str]]:
        """Workers (role, zone, status) each on 127.0.0.<n>, behind a proxy pairing under
        ``mode``; (client session, url → zone name for the figures)."""
        pools: dict[str, list[str]] = {"prefill": [], "decode": []}
        slices, zone_of, seen = [], {}, []
        for n, (role, zone, status) in enumerate(workers, start=2):
            url = await serve(_worker(role, status, seen), f"127.0.0.{n}")
            pools[role].append(url)
            slices.append(_slice(f"demo-{role}", f"127.0.0.{n}", zone))
            zone_of[url] = str(zone)
        api = await serve(_api(slices), "127.0.0.1")
        zones = Zones(KubeApi(api, "ns"), ["demo-prefill", "demo-decode"], refresh_s=60)
        config = ProxyConfig(locality=mode, **kw)
        proxy = Proxy(pools["prefill"], pools["decode"], config, zones=zones)
        runner = web.AppRunner(build_app(proxy))
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", 0).start()
        session = aiohttp.ClientSession(base_url=f"http://127.0.0.1:{runner.addresses[0][1]}")
        cleanups.extend([session.close, runner.cleanup])
        return session, zone_of

    yield make
    for cleanup in reversed(cleanups):
        await cleanup()
    for server in servers:
        await server.close()


async def _ask(session: Any, **extra: Any) -> tuple[int, dict[str, Any]]:
    body = {"model": "m", "prompt": [1, 2, 3, 4], "max_tokens": 2, **extra}
    async with session.post("/v1/completions", json=body) as resp:
        return resp.status, await resp.json()


async def _metric(session: Any, line: str) -> float:
    async with session.get("/metrics") as resp:
        text = await resp.text()
    found = [x for x in text.splitlines() if x.startswith(line + " ")]
    return float(found[0].split()[-1]) if found else 0.0


TWO_ZONES: list[Worker] = [
    ("prefill", "zone-a", 200), ("prefill", "zone-b", 200), ("prefill", "zone-a", 200),
    ("decode", "zone-b", 200), ("decode", "zone-a", 200), ("decode", "zone-b", 200),
]  # fmt: skip


@pytest.mark.parametrize("mode", ["Required", "Preferred"])
async def test_every_pair_stays_in_one_zone_when_both_zones_have_both(
    stack: Any, mode: str
) -> None:
    session, zone_of = await stack(TWO_ZONES, mode, policy="round-robin")
    pairs = []
    for _ in range(24):
        status, out = await _ask(session)
        assert status == 200, out
        figures = out["disagg"]["proxy"]
        pairs.append((zone_of[figures["prefill_url"]], zone_of[figures["decode_url"]]))
    assert {p for p, _ in pairs} == {"zone-a", "zone-b"}  # both zones served
    assert all(p == d for p, d in pairs), pairs
    assert await _metric(session, 'disagg_proxy_transfer_pairs_total{zones="same"}') == 24
    assert await _metric(session, 'disagg_proxy_transfer_pairs_total{zones="cross"}') == 0


async def test_required_refuses_naming_the_zone_when_no_zone_has_both(stack: Any) -> None:
    workers: list[Worker] = [("prefill", "zone-a", 200), ("decode", "zone-b", 200)]
    session, _ = await stack(workers, "Required")
    status, out = await _ask(session)
    assert status == 503
    text = out["error"]["message"]
    assert "prefill zones: zone-a" in text and "decode zones: zone-b" in text
    assert "transferLocality" in text
    assert await _metric(session, 'disagg_proxy_locality_refused_total{zone="zone-a"}') == 1


async def test_required_never_pairs_a_zoned_prefill_with_an_unknown_zone(stack: Any) -> None:
    workers: list[Worker] = [("prefill", "zone-a", 200), ("decode", None, 200)]
    session, _ = await stack(workers, "Required")
    status, out = await _ask(session)
    assert status == 503 and "decode zones: (none)" in out["error"]["message"]


async def test_required_does_not_fail_over_to_another_zones_decode(stack: Any) -> None:
    # the only zone-a decode is full: its 503 is the answer, not a zone-b decode
    workers: list[Worker] = [
        ("prefill", "zone-a", 200), ("decode", "zone-a", 503), ("decode", "zone-b", 200),
    ]  # fmt: skip
    session, _ = await stack(workers, "Required")
    for _ in range(4):
        status, _out = await _ask(session)
        assert status == 503
    assert await _metric(session, 'disagg_proxy_transfer_pairs_total{zones="cross"}') == 0


async def test_preferred_falls_back_across_zones_and_counts_it(stack: Any) -> None:
    workers: list[Worker] = [("prefill", "zone-a", 200), ("decode", "zone-b", 200)]
    session, zone_of = await stack(workers, "Preferred")
    status, out = await _ask(session)
    assert status == 200, out
    assert zone_of[out["disagg"]["proxy"]["decode_url"]] == "zone-b"
    assert await _metric(session, 'disagg_proxy_transfer_pairs_total{zones="cross"}') == 1


async def test_preferred_fails_over_to_another_zone_when_its_decode_is_full(stack: Any) -> None:
    workers: list[Worker] = [
        ("prefill", "zone-a", 200), ("decode", "zone-a", 503), ("decode", "zone-b", 200),
    ]  # fmt: skip
    session, zone_of = await stack(workers, "Preferred")
    status, out = await _ask(session)
    assert status == 200 and zone_of[out["disagg"]["proxy"]["decode_url"]] == "zone-b"


async def test_a_stream_is_paired_within_the_zone_too(stack: Any) -> None:
    session, zone_of = await stack(TWO_ZONES, "Required", policy="round-robin")
    for _ in range(6):
        body = {"model": "m", "prompt": [1, 2], "max_tokens": 2, "stream": True}
        async with session.post("/v1/completions", json=body) as resp:
            assert resp.status == 200
            prefill, decode = (
                resp.headers["X-Disagg-Prefill-Url"],
                resp.headers["X-Disagg-Decode-Url"],
            )
            await resp.read()
        assert zone_of[prefill] == zone_of[decode]


async def test_a_failed_zone_list_is_counted() -> None:
    with socket.socket() as s:  # a port nobody listens on: the API server is unreachable
        s.bind(("127.0.0.1", 0))
        closed = f"http://127.0.0.1:{s.getsockname()[1]}"
    zones = Zones(KubeApi(closed, "ns"), ["demo-prefill", "demo-decode"], refresh_s=60)
    proxy = Proxy([closed], [closed], ProxyConfig(locality="Required"), zones=zones)
    await proxy.start()
    try:
        text = proxy.metrics.render().decode()
    finally:
        await proxy.close()
    assert "disagg_proxy_zone_list_failures_total 1.0" in text


async def test_the_prefill_follows_the_planners_decode(stack: Any) -> None:
    # prefix affinity sends a repeated prompt to the decode that answered it first; the
    # prefill is then taken from that decode's zone, though the pool would pick the other
    workers: list[Worker] = [
        ("prefill", "zone-a", 200), ("prefill", "zone-b", 200),
        ("decode", "zone-a", 200), ("decode", "zone-b", 200),
    ]  # fmt: skip
    policy = Policy(prefix_cache=True, block_tokens=2)
    session, zone_of = await stack(workers, "Required", policy="round-robin", routing=policy)
    prompt = {"prompt": [5, 6, 7, 8, 9, 10]}
    _, first = await _ask(session, **prompt)
    held = first["disagg"]["proxy"]["decode_url"]
    for _ in range(6):
        status, out = await _ask(session, **prompt)
        figures = out["disagg"]["proxy"]
        assert status == 200 and figures["decode_url"] == held
        assert zone_of[figures["prefill_url"]] == zone_of[held]


async def test_both_hops_at_once_pair_within_the_zone_too() -> None:
    # the rooms protocol (both hops at once: the prefill is picked before either hop) under
    # Required: only the zone-b prefill has a decode in its zone, whatever the pool's turn
    servers: list[TestServer] = []
    slices = []
    urls: dict[str, list[str]] = {"prefill": [], "decode": []}
    for n, (role, zone) in enumerate(
        [("prefill", "zone-a"), ("prefill", "zone-b"), ("decode", "zone-b")], start=2
    ):
        server = TestServer(toy.app(role), host=f"127.0.0.{n}")
        await server.start_server()
        servers.append(server)
        urls[role].append(str(server.make_url("")).rstrip("/"))
        slices.append(_slice(f"demo-{role}", f"127.0.0.{n}", zone))
    api = TestServer(_api(slices), host="127.0.0.1")
    await api.start_server()
    zones = Zones(KubeApi(str(api.make_url("")), "ns"), ["demo-prefill", "demo-decode"], 60)
    config = ProxyConfig(policy="round-robin", protocol=Rooms(itertools.count(7).__next__),
                         locality="Required")  # fmt: skip
    proxy = Proxy(urls["prefill"], urls["decode"], config, zones=zones)
    await proxy.start()
    try:
        for i in range(4):
            body = {"model": "toy", "prompt": f"p{i}", "max_tokens": 3}
            out = await proxy.complete("/v1/completions", body, {})
            assert out["toy_kv"] == "fetched"
            assert out["disagg"]["proxy"]["prefill_url"] == urls["prefill"][1]
    finally:
        await proxy.close()
        await api.close()
        for server in servers:
            await server.close()
