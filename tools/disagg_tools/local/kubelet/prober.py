"""One probe run against a local container, as ``pkg/kubelet/prober/prober.go`` and
``pkg/probe`` run it (Kubernetes 1.36): an HTTP GET succeeds on a status in [200, 400)
(after following redirects to the same host), a TCP probe on an accepted connection, an
exec probe on exit status 0; anything that does not answer within ``timeoutSeconds``
failed.

I/O layer (aiohttp, sockets, processes); :mod:`.rules.probes` decides what a result means.
"""

from __future__ import annotations

import asyncio
from collections.abc import Mapping
from urllib.parse import urljoin, urlsplit

import aiohttp

from disagg_tools.local.kubelet.driver import PROCESSES, Driver
from disagg_tools.local.kubelet.rules import containers
from disagg_tools.local.kubelet.rules.probes import FAILURE, SUCCESS, Rule

MAX_REDIRECTS = 10  # net/http's limit, which the prober's redirect checker keeps


async def attempt(
    http: aiohttp.ClientSession,
    run: containers.PodRun,
    process: containers.Process,
    rule: Rule,
    env: Mapping[str, str],
    *,
    driver: Driver = PROCESSES,
) -> str:
    """Success or Failure of one run of ``rule`` on ``process`` of ``run``; an exec probe
    runs in the container through ``driver``, with ``env``."""
    try:
        async with asyncio.timeout(rule.timeout):
            ok = await _once(http, run, process, rule, env, driver)
    except (asyncio.TimeoutError, OSError, aiohttp.ClientError):
        ok = False
    return SUCCESS if ok else FAILURE


async def _once(
    http: aiohttp.ClientSession,
    run: containers.PodRun,
    process: containers.Process,
    rule: Rule,
    env: Mapping[str, str],
    driver: Driver,
) -> bool:
    action = rule.action
    if "httpGet" in action:
        return await _http_get(http, containers.probe_url(run.address, process.spec, action))
    if "tcpSocket" in action:
        port = containers.probe_port(process.spec, action["tcpSocket"]["port"])
        _, writer = await asyncio.open_connection(run.address, port)
        writer.close()
        return True
    if "exec" in action:
        argv = driver.exec_argv(run, process, action["exec"]["command"])
        proc = await asyncio.create_subprocess_exec(
            *argv, env=dict(env), stdout=asyncio.subprocess.DEVNULL,
            stderr=asyncio.subprocess.DEVNULL,
        )  # fmt: skip
        try:
            return await proc.wait() == 0
        finally:
            if proc.returncode is None:
                proc.kill()
    return False  # containers.pod_run refuses the kinds it cannot run


async def _http_get(http: aiohttp.ClientSession, url: str) -> bool:
    """``DoHTTPProbe``: redirects to the same host are followed (10 at most), one to
    another host ends the probe as a success (``probe.Warning``)."""
    target = url
    for _ in range(MAX_REDIRECTS + 1):
        async with http.get(target, allow_redirects=False) as resp:
            if not 300 <= resp.status < 400 or "Location" not in resp.headers:
                return 200 <= resp.status < 400
            nxt = urljoin(target, resp.headers["Location"])
            if urlsplit(nxt).hostname != urlsplit(target).hostname:
                return True
            target = nxt
    return False  # stopped after 10 redirects: an error, so a failure
