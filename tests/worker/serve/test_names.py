"""Names a pod resolves: the local kubelet's table (DISAGG_HOSTS_FILE) first, the system
resolver for the rest; a real aiohttp client and the proxy's discovery read it."""

from __future__ import annotations

import os
from pathlib import Path

import aiohttp
import pytest
from aiohttp import web
from aiohttp.test_utils import TestServer

from disagg_worker.serve import names
from disagg_worker.serve.proxy.discovery import resolve


@pytest.fixture()
def hosts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    path = tmp_path / "hosts"
    path.write_text("demo-p-a 127.0.0.3 127.0.0.2\ndemo-p-b\n# a comment\nHTTP.Demo. 127.0.0.1\n")
    monkeypatch.setenv(names.ENV, str(path))
    return path


def test_the_table_is_read_again_when_it_changes(hosts: Path) -> None:
    assert names.local("demo-p-a") == ["127.0.0.3", "127.0.0.2"]
    assert names.local("http.demo") == ["127.0.0.1"]  # case and the root dot do not matter
    assert names.local("demo-p-b") == []  # a Service with no ready pod
    assert names.local("example.org") is None  # not ours: the system resolver's
    hosts.write_text("demo-p-a 127.0.0.9\n")
    os.utime(hosts, ns=(1, 1))  # another stamp even within the clock's resolution
    assert names.local("demo-p-a") == ["127.0.0.9"]


async def test_discovery_resolves_the_table_and_no_address_is_nxdomain(hosts: Path) -> None:
    assert await resolve("demo-p-a", 8000) == ["http://127.0.0.2:8000", "http://127.0.0.3:8000"]
    with pytest.raises(OSError, match="no ready pod"):
        await resolve("demo-p-b", 8000)
    assert await resolve("127.0.0.1", 8000) == ["http://127.0.0.1:8000"]  # the system's


async def test_an_http_client_reaches_a_name_of_the_table(hosts: Path) -> None:
    async def hello(_: web.Request) -> web.Response:
        return web.Response(text="hello")

    app = web.Application()
    app.router.add_get("/", hello)
    server = TestServer(app, host="127.0.0.1")
    await server.start_server()
    try:
        connector = aiohttp.TCPConnector(resolver=names.Resolver())
        async with aiohttp.ClientSession(connector=connector) as http:
            async with http.get(f"http://http.demo:{server.port}/") as resp:
                assert await resp.text() == "hello"
            with pytest.raises(aiohttp.ClientConnectorError):
                await http.get(f"http://demo-p-b:{server.port}/")
    finally:
        await server.close()


def test_without_the_variable_nothing_is_local(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(names.ENV, raising=False)
    assert names.local("demo-p-a") is None
