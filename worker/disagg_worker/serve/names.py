"""What a name resolves to in a pod: cluster DNS, or the local kubelet's table for it.

I/O layer (a file, the system resolver). In a cluster a Service's name resolves through
cluster DNS: a headless Service to its ready pods' addresses, none (NXDOMAIN) while no pod
is ready. The local kubelet (``disagg_operator.local.kubelet``) runs pods as processes on
one host, where there is no cluster DNS; it keeps what cluster DNS would answer in a file
(one line a name: ``name address...``; a name with no address is a Service with no ready
pod) and names that file in each process's ``DISAGG_HOSTS_FILE``. A name in that file
resolves to its addresses; every other name (and every name when the variable is unset,
as in a cluster) goes to the system resolver. The file is read again when it changes.
"""

from __future__ import annotations

import asyncio
import os
import socket
from typing import Any

from aiohttp.abc import AbstractResolver, ResolveResult
from aiohttp.resolver import DefaultResolver

from disagg_contract.config import HOSTS_FILE_ENV

ENV = HOSTS_FILE_ENV
_read: dict[str, tuple[tuple[int, int], dict[str, list[str]]]] = {}  # path → (stamp, table)


def table(path: str) -> dict[str, list[str]]:
    """The names in ``path`` and their addresses ({} when it cannot be read)."""
    try:
        info = os.stat(path)
    except OSError:
        return {}
    stamp = (info.st_mtime_ns, info.st_size)
    cached = _read.get(path)
    if cached is not None and cached[0] == stamp:
        return cached[1]
    names: dict[str, list[str]] = {}
    try:
        with open(path, encoding="utf-8") as f:
            for line in f:
                words = line.split()
                if words and not words[0].startswith("#"):
                    names[words[0].rstrip(".").lower()] = words[1:]
    except OSError:
        return {}
    _read[path] = (stamp, names)
    return names


def local(host: str) -> list[str] | None:
    """``host``'s addresses from the local kubelet's table; None when it is not there (or
    there is no table): ask the system resolver."""
    path = os.environ.get(ENV)
    if not path:
        return None
    return table(path).get(host.rstrip(".").lower())


async def addresses(host: str, port: int) -> list[str]:
    """Every address ``host`` resolves to, sorted; OSError when none (NXDOMAIN)."""
    found = local(host)
    if found is not None:
        if not found:
            raise OSError(f"{host}: no address (a Service with no ready pod)")
        return sorted(found)
    loop = asyncio.get_running_loop()
    infos = await loop.getaddrinfo(host, port, type=socket.SOCK_STREAM)
    return sorted({str(info[4][0]) for info in infos})


class Resolver(AbstractResolver):
    """aiohttp's resolver with the local kubelet's table first."""

    def __init__(self) -> None:
        self._system = DefaultResolver()

    async def resolve(
        self, host: str, port: int = 0, family: socket.AddressFamily = socket.AF_INET
    ) -> list[ResolveResult]:
        found = local(host)
        if found is None:
            return await self._system.resolve(host, port, family)
        if not found:
            raise OSError(f"{host}: no address (a Service with no ready pod)")
        return [_result(host, a, port) for a in found]

    async def close(self) -> None:
        await self._system.close()


def _result(host: str, address: str, port: int) -> Any:
    six = ":" in address
    return ResolveResult(
        hostname=host,
        host=address,
        port=port,
        family=socket.AF_INET6 if six else socket.AF_INET,
        proto=0,
        flags=socket.AI_NUMERICHOST,
    )
