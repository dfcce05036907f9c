"""Cluster DNS for the local kubelet's process pods (kubelet/dns/sitecustomize.py): a fresh
interpreter with the shim first on its PYTHONPATH, as the kubelet starts a pod's process,
resolves the kubelet's table through the product's own code (the proxy's discovery and an
aiohttp client with the proxy's resolver), which knows nothing of it."""

from __future__ import annotations

import importlib.util
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from disagg_operator.engines.vllm import engine_idle
from disagg_tools.local.kubelet.rules import containers, endpoints

# run in the child: the proxy's discovery, then an HTTP GET through the proxy's resolver
CHILD = """
import asyncio, json, aiohttp
from aiohttp import web
from disagg_worker.serve.proxy.discovery import resolve

async def main():
    out = {"a": await resolve("demo-p-a", 8000)}
    try:
        await resolve("demo-p-b", 8000)
    except OSError as e:
        out["b"] = type(e).__name__
    app = web.Application()
    app.router.add_get("/", lambda r: web.Response(text="hello"))
    runner = web.AppRunner(app)
    await runner.setup()
    site = web.TCPSite(runner, "127.0.0.1", 0)
    await site.start()
    port = site._server.sockets[0].getsockname()[1]
    connector = aiohttp.TCPConnector(resolver=aiohttp.ThreadedResolver())
    async with aiohttp.ClientSession(connector=connector) as http:
        async with http.get(f"http://HTTP.Demo.:{port}/") as resp:
            out["get"] = await resp.text()
    await runner.cleanup()
    print(json.dumps(out))

asyncio.run(main())
"""


def _run(env: dict[str, str]) -> dict[str, object]:
    done = subprocess.run(
        [sys.executable, "-c", CHILD], env={**os.environ, **env}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    out: dict[str, object] = json.loads(done.stdout.strip().splitlines()[-1])
    return out


@pytest.fixture()
def hosts(tmp_path: Path) -> Path:
    table = {"demo-p-a": ["127.0.0.3", "127.0.0.2"], "demo-p-b": [], "http.demo": ["127.0.0.1"]}
    path = tmp_path / "hosts"
    path.write_text(endpoints.hosts_text(table))
    return path


def test_a_pod_process_resolves_the_kubelets_table_through_the_products_code(
    hosts: Path,
) -> None:
    env = containers.with_dns({containers.HOSTS_ENV: str(hosts)})
    got = _run(env)
    assert got == {
        "a": ["http://127.0.0.2:8000", "http://127.0.0.3:8000"],
        "b": "gaierror",  # a Service with no ready pod: NXDOMAIN
        "get": "hello",  # case and the root dot do not matter
    }


def test_without_the_table_names_resolve_as_the_system_does(hosts: Path) -> None:
    env = containers.with_dns({})  # the shim, but no table: as in a cluster
    done = subprocess.run(
        [sys.executable, "-c", "import socket; socket.getaddrinfo('demo-p-a', 80)"],
        env={**os.environ, **env}, capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode != 0 and "gaierror" in done.stderr


def test_the_shim_reads_the_table_the_kubelet_writes(hosts: Path) -> None:
    spec = importlib.util.spec_from_file_location(
        "dns_shim_module", Path(containers.DNS_SHIM) / "sitecustomize.py"
    )
    assert spec is not None and spec.loader is not None
    shim = importlib.util.module_from_spec(spec)
    before = __import__("socket").getaddrinfo
    try:
        spec.loader.exec_module(shim)
        assert shim.ENV == containers.HOSTS_ENV
        assert shim.table(str(hosts)) == endpoints.parse_hosts(hosts.read_text())
    finally:
        __import__("socket").getaddrinfo = before


def test_the_shim_runs_once_beside_the_vllm_idle_shim(hosts: Path) -> None:
    """A vLLM pod's process has the idle shim on its PYTHONPATH too: both run, once each
    (the idle shim runs the first other sitecustomize it finds, which is this one)."""
    idle = Path(engine_idle.FOLDER)  # type: ignore[arg-type]
    env = containers.with_dns({containers.HOSTS_ENV: str(hosts), "PYTHONPATH": str(idle)})
    code = (
        "import socket, sys; print(getattr(socket.getaddrinfo, 'disagg_hosts_file', False),"
        " any(getattr(f, 'disagg_engine_idle', False) for f in sys.meta_path))"
    )
    done = subprocess.run(
        [sys.executable, "-c", code], env={**os.environ, **env}, capture_output=True,
        text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr[-2000:]
    assert done.stdout.split() == ["True", "True"]
